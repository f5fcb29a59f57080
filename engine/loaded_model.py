"""The engine's public face: ``Engine.load(plan) -> LoadedModel``.

A LoadedModel wraps one ``ExecutorLike`` (engine/runtime/surface.py): a thread in this
process, or — for a plan that uses RPC workers — an executor in a child process of its own
(``engine.model_process.process``), because llama.cpp's RPC client ends the process that loses
a worker. ``Engine.load`` picks; both offer the same signals, state and methods, so callers
never know which they got. Everything is safe to call from
any thread: commands travel through the executor's queue (or the child's socket), results
come back as Qt signals (queued into the receiver's thread) and on each request's handle.
"""

from __future__ import annotations

import atexit
import weakref
from collections.abc import Callable

from PySide6.QtCore import QObject

from engine.base.defaults import DEFAULT_QUEUE_CAPACITY
from engine.chat.traits import ChatTraits
from engine.chat_model import ModelLabel
from engine.planner import LoadPlan
from engine.requests.handle import RequestHandle
from engine.requests.request import ChatRequest
from engine.requests.stats import EngineStats
from engine.runtime.executor import Executor
from engine.runtime.surface import SIGNALS, ExecutorLike, ExecutorState, LoadOrder
from engine.speculation.policy import SpeculationConfig

__all__ = ["Engine", "LoadedModel"]

_live: weakref.WeakSet[LoadedModel] = weakref.WeakSet()


@atexit.register
def _unload_all() -> None:
    """A model still loaded at exit is unloaded first: an executor thread running native
    code while the interpreter and Qt tear down would crash the process (and a split
    model's child would keep its workers busy)."""
    for model in list(_live):
        model.unload(wait=True)


class LoadedModel(QObject):
    """A model being loaded, serving, or unloaded: what ``Engine.load`` returns.

    Its signals are its executor's own (``engine.runtime.surface.SIGNALS``), not relays:
    ``phase_started(LoadPhase)``, ``phase_progress(LoadPhase, fraction)``,
    ``phase_finished(LoadPhase, seconds)``, ``ready()``, ``load_failed(EngineError)``,
    ``unloaded()``, ``worker_lost(EngineError)`` (a split model's worker or process was lost;
    ``unloaded`` follows). They are emitted on the executor thread (a split model: the thread
    that reads its child), so a receiver in the GUI thread gets them queued, in its own thread.
    """

    def __init__(self, executor: ExecutorLike) -> None:
        super().__init__()
        self.plan = executor.plan
        self._executor = executor
        for name in SIGNALS:
            setattr(self, name, getattr(executor, name))

    def start(self) -> LoadedModel:
        _live.add(self)
        self._executor.start()
        return self

    # -- state ------------------------------------------------------------------------

    @property
    def is_ready(self) -> bool:
        return self._executor.state is ExecutorState.READY

    @property
    def state(self) -> ExecutorState:
        return self._executor.state

    @property
    def reported_memory(self):  # -> engine.native.llama_log.ReportedMemory | None
        """llama.cpp's own buffer sizes from the load's log, beside the plan's prediction."""
        return self._executor.reported_memory

    @property
    def label(self) -> ModelLabel:
        """Who writes its replies (``engine.chat_model.ChatModel``)."""
        info = self.plan.model
        return ModelLabel(info.display_name, str(info.path), info.file_type)

    @property
    def speculation(self) -> SpeculationConfig:
        return self._executor.speculation

    @property
    def has_vision(self) -> bool:
        """Whether requests may carry images (a projector was loaded)."""
        return self._executor.has_vision

    @property
    def chat_traits(self) -> ChatTraits | None:
        """What the model's chat template does about tools and thinking (computed at load;
        None until the model is loaded)."""
        return self._executor.chat_traits

    @property
    def context_per_conversation(self) -> int:
        return self._executor.n_ctx_seq or self.plan.params.n_ctx_seq

    def wait_ready(self, timeout: float | None = None) -> LoadedModel:
        """Block until loaded; raises the load's EngineError if it failed."""
        self._executor.wait_ready(timeout)
        return self

    def cancel_load(self) -> None:
        self._executor.cancel_load()

    # -- requests -----------------------------------------------------------------------

    def submit(
        self, request: ChatRequest, connect: Callable[[RequestHandle], None] | None = None
    ) -> RequestHandle:
        """Queue a reply; raises Overloaded (never blocks) when too many are waiting.

        Signals fire as soon as the executor gets to the request: connect them in
        ``connect(handle)``, which runs before the request is queued. (``events()`` and
        ``wait()`` need no such care: they keep every event.)
        """
        return self._executor.submit(request, connect)

    def cancel(self, request_id: int) -> None:
        self._executor.cancel(request_id)

    def stats(self, timeout: float = 5.0) -> EngineStats:
        return self._executor.stats(timeout)

    def request_stats(self):  # -> concurrent.futures.Future[EngineStats]
        """Non-blocking stats: a future answered between two batches."""
        return self._executor.request_stats()

    def measure_prompt(self, request: ChatRequest):  # -> concurrent.futures.Future[PromptSize]
        """How many of a conversation's positions ``request``'s prompt would take, rendered
        and tokenized exactly as ``submit`` would (template, earlier replies, images): a
        future answered between two batches, so a composer can count while the user types.
        Nothing runs; a prompt that cannot be built sets the future's exception."""
        return self._executor.measure(request)

    def unload(self, wait: bool = True) -> None:
        """Stop serving, end every request, free every native allocation (a split model:
        its child exits, killed if it has not within ``UNLOAD_TIMEOUT_S``). A model whose
        worker was lost is already unloaded: this returns at once."""
        self._executor.request_unload()
        if wait:
            self._executor.wait()

    @property
    def lost_worker(self) -> bool:
        """An RPC worker this model used was lost: its process ended, the model is unloaded."""
        return self._executor.lost_worker


class Engine:
    """Entry point: plan with engine.planner, then ``Engine.load(plan)``."""

    @staticmethod
    def load(
        plan: LoadPlan,
        *,
        force: bool = False,
        queue_capacity: int = DEFAULT_QUEUE_CAPACITY,
        speculation: SpeculationConfig | None = None,
        start: bool = True,
    ) -> LoadedModel:
        """Start loading in the background; connect to the signals or ``wait_ready()``.

        ``speculation``: prompt lookup or a draft model (the draft must be in the plan's
        request so its memory is counted); defaults to the plan's draft, if any.
        ``start=False``: nothing runs until ``model.start()``, so that signals can be
        connected before the first one can fire.
        """
        model = LoadedModel(Engine.executor(LoadOrder(plan, force, queue_capacity, speculation)))
        return model.start() if start else model

    @staticmethod
    def executor(order: LoadOrder) -> ExecutorLike:
        """What serves ``order``: a thread in this process, or, for a plan that uses RPC
        workers, a child process of its own (llama.cpp's RPC client ends the process that
        loses a worker)."""
        if order.plan.workers:
            from engine.model_process.process import ModelProcess  # its child machinery, only when split

            return ModelProcess(order)
        return Executor(order)
