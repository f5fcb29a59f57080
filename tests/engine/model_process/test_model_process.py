"""A model in a child process (engine/model_process/process.py), as every split model runs:
the protocol's values survive pickling, and a real child with a real (tiny) model serves,
fails to load, unloads and dies as the parent says. No worker is needed for any of it: the
child runs whatever plan it is given, so these use local plans."""

from __future__ import annotations

import importlib
import inspect
import os
import pickle
import pkgutil
import signal
import time
from pathlib import Path

import psutil
import pytest
from PySide6.QtCore import Qt

import engine
from engine.base.errors import (
    EngineError,
    InvalidChatRequest,
    InvalidModelFile,
    LoadFailed,
    ModelProcessEnded,
    WorkerUnavailable,
)
from engine.chat import ChatMessage
from engine.model_process.process import ModelProcess
from engine.model_process.protocol import ChildAnswer, ChildEvent, ChildSignal
from engine.planner import LoadPhase
from engine.requests.completion import Completion, StopReason, Timings, TokenLogprob, TopLogprob, Usage
from engine.requests.events import Completed, Failed, Prefill, Queued, Started, TextDelta
from engine.requests.request import ChatRequest, PromptSize
from engine.runtime.commands import Measure, Observe, Submit
from engine.runtime.surface import ExecutorState, LoadOrder
from engine.sampling.params import GREEDY, SamplingParams
from engine.speculation.policy import SpeculationConfig
from tests.conftest import SCRIPT_TEXT, plan_for

TIMEOUT = 60
DIRECT = Qt.ConnectionType.DirectConnection


def round_trip(value: object) -> object:
    return pickle.loads(pickle.dumps(value))


def engine_errors() -> list[type[EngineError]]:
    """Every EngineError subclass the engine defines (each module imported first)."""
    for module in pkgutil.walk_packages(engine.__path__, "engine."):
        importlib.import_module(module.name)
    found, todo = [], [EngineError]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo += cls.__subclasses__()
    return [c for c in found if c.__module__.startswith("engine")]


def instance(cls: type[EngineError]) -> EngineError:
    params = [
        p for p in list(inspect.signature(cls.__init__).parameters.values())[1:] if p.default is p.empty
    ]
    return cls(*(f"{p.name} value" for p in params))


def test_every_engine_error_round_trips_through_pickle() -> None:
    classes = engine_errors()
    assert InvalidModelFile in classes and WorkerUnavailable in classes and len(classes) > 30
    for cls in classes:
        error = instance(cls)
        error.extra = 3  # type: ignore[attr-defined]  # whatever an instance carries travels too
        back = round_trip(error)
        assert type(back) is cls, cls
        assert back.message == error.message and str(back) == str(error), cls
        assert back.__dict__ == error.__dict__, cls
    bad = round_trip(InvalidModelFile(Path("/m.gguf"), "not a GGUF file"))
    assert (
        bad.path == Path("/m.gguf") and bad.reason == "not a GGUF file" and bad.message == "not a GGUF file"
    )


def test_requests_events_and_answers_round_trip(tiny_model: Path) -> None:
    request = ChatRequest(
        messages=(
            ChatMessage("system", "be brief"),
            ChatMessage("user", "hé", tokens=(1, 2), tokens_model="m"),
        ),
        sampling=SamplingParams(temperature=0.3, top_k=5, seed=9, logprobs=2),
        max_tokens=7,
        stop=("\n\n",),
        owner="conv-1",
        tools=({"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}},),
    )
    assert round_trip(Submit(request)) == Submit(request)  # the executor's own command
    assert round_trip(request).request_id == request.request_id  # events come back under it
    logprob = TokenLogprob("a", -0.5, b"a", (TopLogprob("a", -0.5, b"a"), TopLogprob("b", -1.5, b"b")))
    completion = Completion(
        "ab",
        StopReason.LENGTH,
        Usage(3, 1, 2),
        Timings(0.1, 0.2, 0.3, 0.4, 5.0, 6.0),
        (4, 5),
        2,
        1,
        "id",
        (logprob,),
    )
    events = [
        Queued(2),
        Prefill(3, 10, 1, 0, 1),
        Started(),
        TextDelta("ab", (logprob,), ("a", "b")),
        Completed(completion),
        Failed(WorkerUnavailable("Lost the worker at 127.0.0.1:1")),
    ]
    for event in events:
        back = round_trip(ChildEvent(request.request_id, event))
        assert type(back.event) is type(event)
        if isinstance(event, Failed):
            assert (
                type(back.event.error) is WorkerUnavailable
                and back.event.error.message == event.error.message
            )
        else:
            assert back == ChildEvent(request.request_id, event)
    assert round_trip(ChildAnswer(1, PromptSize(5, 10))) == ChildAnswer(1, PromptSize(5, 10))
    assert round_trip(Measure(request, token=2)) == Measure(request, token=2)
    assert round_trip(Observe(token=3)).token == 3
    assert round_trip(ChildSignal("phase_progress", (LoadPhase.WEIGHTS, 0.5))) == ChildSignal(
        "phase_progress", (LoadPhase.WEIGHTS, 0.5)
    )
    plan = plan_for(tiny_model, ctx=256, parallel=2)
    order = LoadOrder(plan, False, 8, SpeculationConfig())
    assert round_trip(order) == order


def child(plan, **kwargs: object) -> ModelProcess:
    process = ModelProcess(LoadOrder(plan, **kwargs))  # type: ignore[arg-type]
    process.start()
    return process


def events_of(process: ModelProcess) -> dict[str, list]:
    seen: dict[str, list] = {
        "phases": [],
        "progress": [],
        "ready": [],
        "lost": [],
        "unloaded": [],
        "failed": [],
    }
    process.phase_started.connect(seen["phases"].append, DIRECT)
    process.phase_progress.connect(lambda phase, f: seen["progress"].append((phase, f)), DIRECT)
    process.ready.connect(lambda: seen["ready"].append(True), DIRECT)
    process.worker_lost.connect(seen["lost"].append, DIRECT)
    process.unloaded.connect(lambda: seen["unloaded"].append(True), DIRECT)
    process.load_failed.connect(seen["failed"].append, DIRECT)
    return seen


def test_a_model_in_a_child_serves_as_a_local_one(scripted_model: Path) -> None:
    plan = plan_for(scripted_model, ctx=512, parallel=2)
    process = ModelProcess(LoadOrder(plan))
    seen = events_of(process)
    process.start()
    process.wait_ready(TIMEOUT)
    pid = process.pid
    assert pid is not None and psutil.pid_exists(pid) and pid != os.getpid()
    # ``ready`` is emitted on the reader thread just after ``wait_ready`` was released.
    deadline = time.monotonic() + 5
    while not seen["ready"] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert process.state is ExecutorState.READY and seen["ready"] == [True]
    assert LoadPhase.WEIGHTS in seen["phases"] and seen["progress"]
    assert process.reported_memory is not None and process.reported_memory.model  # llama.cpp's own lines
    assert process.n_ctx_seq == 512 and process.chat_traits is not None and not process.has_vision

    request = ChatRequest(messages=(ChatMessage("user", "hi"),), sampling=GREEDY, max_tokens=20)
    handle = process.submit(request)
    kinds = [type(e).__name__ for e in handle.events(TIMEOUT)]
    assert kinds[0] == "Queued" and kinds[-1] == "Completed" and "TextDelta" in kinds and "Prefill" in kinds
    assert handle.completion is not None and handle.completion.text == SCRIPT_TEXT
    unpicklable = ChatMessage("user", "hi", images=(lambda: 0,))
    with pytest.raises(InvalidChatRequest, match="could not be sent to the model's process"):
        process.submit(ChatRequest(messages=(unpicklable,), sampling=GREEDY))
    size = process.measure(request).result(TIMEOUT)  # nothing half-sent: the socket still works
    assert size.tokens > 0 and size.limit == 512
    stats = process.stats(TIMEOUT)
    assert stats.completed_requests == 1 and stats.n_ctx_per_sequence == 512

    process.request_unload()
    t = time.monotonic()
    process.wait()
    assert time.monotonic() - t < 10
    assert process.state is ExecutorState.UNLOADED and seen["unloaded"] == [True] and not seen["lost"]
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    with pytest.raises(LoadFailed):
        process.submit(request)


def test_a_child_killed_mid_reply_fails_every_pending_request(looping_model: Path) -> None:
    process = ModelProcess(LoadOrder(plan_for(looping_model, ctx=4096, parallel=1)))
    seen = events_of(process)
    process.start()
    process.wait_ready(TIMEOUT)
    endless = ChatRequest(prompt="x", sampling=GREEDY, max_tokens=4000, ignore_eos=True, cache=False)
    first = process.submit(endless)
    second = process.submit(ChatRequest(prompt="y", sampling=GREEDY, max_tokens=4000, ignore_eos=True))
    next(e for e in first.events(TIMEOUT) if isinstance(e, TextDelta))
    assert process.pid is not None
    os.kill(process.pid, signal.SIGKILL)
    killed = time.monotonic()
    with pytest.raises(ModelProcessEnded, match="ended unexpectedly \\(signal SIGKILL\\)"):
        first.wait(10)
    seconds = time.monotonic() - killed
    with pytest.raises(ModelProcessEnded):
        second.wait(10)
    process.wait()
    assert seconds < 5, seconds
    assert process.state is ExecutorState.UNLOADED and not process.lost_worker  # no worker to lose
    assert len(seen["lost"]) == 1 and isinstance(seen["lost"][0], ModelProcessEnded)
    assert seen["unloaded"] == [True] and not seen["failed"]
    with pytest.raises(LoadFailed):
        process.submit(endless)
    with pytest.raises(ModelProcessEnded):
        process.request_stats().result(1)
    process.request_unload()  # nothing left to unload: returns at once
    process.wait()


def test_a_load_failure_in_the_child_comes_back_as_load_failed(make_tiny_model) -> None:
    path = make_tiny_model("changed.gguf")
    plan = plan_for(path, ctx=256, parallel=1)
    make_tiny_model("changed.gguf", n_layer=3)  # the file changed since it was planned
    process = ModelProcess(LoadOrder(plan))
    seen = events_of(process)
    process.start()
    with pytest.raises(LoadFailed, match="changed since it was planned"):
        process.wait_ready(TIMEOUT)
    process.wait(TIMEOUT)  # the child ends by itself after a failed load
    assert process.state is ExecutorState.FAILED and len(seen["failed"]) == 1
    assert not seen["lost"] and not seen["unloaded"]
    assert process._process is not None and process._process.returncode == 0


PARENT = """
import sys, time
from pathlib import Path
from engine.model_process.process import ModelProcess
from engine.runtime.surface import LoadOrder
from tests.conftest import plan_for
model = ModelProcess(LoadOrder(plan_for(Path(sys.argv[1]), ctx=256, parallel=1)))
model.start()
model.wait_ready(60)
print(model.pid, flush=True)
time.sleep(600)
"""


def test_a_child_whose_parent_died_unloads_and_exits(tiny_model: Path) -> None:
    """No orphan keeps a model (and its workers) after the app was killed: the child sees
    its socket close and unloads."""
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[3]
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, str(tiny_model)], cwd=repo, stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None
        pid = int(parent.stdout.readline())
        assert psutil.pid_exists(pid)
        parent.kill()
        parent.wait(10)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                break
            time.sleep(0.1)
        else:
            psutil.Process(pid).kill()
            raise AssertionError("the orphaned child kept running")
    finally:
        if parent.poll() is None:
            parent.kill()
