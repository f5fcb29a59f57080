"""One surface for whatever serves a model (engine/runtime/surface.py): the executor in this
process and the split model's child process both are ``ExecutorLike``, and ``LoadedModel``
offers exactly their signals, without restating them."""

from __future__ import annotations

import inspect
from pathlib import Path

from PySide6.QtCore import Signal

from engine.loaded_model import Engine, LoadedModel
from engine.model_process.process import ModelProcess
from engine.runtime.executor import Executor
from engine.runtime.surface import SIGNALS, ExecutorLike, LoadOrder
from tests.conftest import plan_for

# Members of the protocol that are not signals: what callers may read and call.
METHODS = (
    "start",
    "wait_ready",
    "cancel_load",
    "submit",
    "cancel",
    "request_stats",
    "stats",
    "measure",
    "request_unload",
    "wait",
)


def test_the_protocol_names_the_seven_signals_and_the_methods() -> None:
    declared = set(ExecutorLike.__annotations__) | {
        name for name, value in vars(ExecutorLike).items() if inspect.isfunction(value)
    }
    assert set(SIGNALS) <= declared and set(METHODS) <= declared
    assert len(SIGNALS) == 7


def test_executor_and_model_process_are_executor_like(tiny_model: Path) -> None:
    order = LoadOrder(plan_for(tiny_model, ctx=256, parallel=1))
    for cls in (Executor, ModelProcess):
        for name in SIGNALS:  # class-level Qt signals, not attributes set by hand
            assert isinstance(getattr(cls, name), Signal), (cls.__name__, name)
        for name in METHODS:
            assert callable(getattr(cls, name)), (cls.__name__, name)
        served = cls(order)  # constructed, never started: no thread, no child
        assert isinstance(served, ExecutorLike)
        assert served.plan is order.plan and served.queue_capacity == order.queue_capacity


_ARGS: dict[str, tuple] = {
    "phase_progress": (object(), 0.5),
    "phase_finished": (object(), 1.0),
    "ready": (),
    "unloaded": (),
}


def test_loaded_model_forwards_every_signal_of_what_engine_load_picked(tiny_model: Path) -> None:
    model = Engine.load(plan_for(tiny_model, ctx=256, parallel=1), start=False)
    assert isinstance(model, LoadedModel) and isinstance(model._executor, Executor)
    for name in SIGNALS:
        fired: list[tuple] = []
        getattr(model, name).connect(lambda *args, _f=fired: _f.append(args))
        getattr(model._executor, name).emit(*_ARGS.get(name, (object(),)))
        assert len(fired) == 1, name
