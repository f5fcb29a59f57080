"""What serves one loaded model, whichever runs it: ``ExecutorLike``, the order it takes, its states.

An ``Executor`` (a thread in this process) and a ``ModelProcess`` (an executor in a child
process, for a plan with RPC workers) offer the same surface, named once here: both are built
from one ``LoadOrder``, emit the seven ``SIGNALS`` and answer the same methods, so
``LoadedModel`` forwards to either without knowing which it holds, and ``Engine.load`` alone
picks. Nothing here imports Qt's thread machinery or llama.cpp: the child's parent reads it
without importing the executor.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from engine.base.defaults import DEFAULT_QUEUE_CAPACITY
from engine.planner import LoadPlan
from engine.speculation.policy import SpeculationConfig, SpeculationMode

if TYPE_CHECKING:
    from engine.base.errors import EngineError
    from engine.chat.traits import ChatTraits
    from engine.native.llama_log import ReportedMemory
    from engine.requests.handle import RequestHandle
    from engine.requests.request import ChatRequest
    from engine.requests.stats import EngineStats


class ExecutorState(enum.Enum):
    LOADING = "loading"
    READY = "ready"
    FAILED = "failed"
    UNLOADED = "unloaded"


def resolve_speculation(plan: LoadPlan, speculation: SpeculationConfig | None) -> SpeculationConfig:
    """What a load speculates with: as asked, else the plan's draft model, else nothing."""
    if speculation is None and plan.request.draft is not None:
        speculation = SpeculationConfig(SpeculationMode.DRAFT_MODEL, draft_path=plan.request.draft.path)
    return speculation or SpeculationConfig()


@dataclass(frozen=True)
class LoadOrder:
    """What to load and how: the one value an executor, a model process and ``LoadedModel`` are
    built from (and, pickled, the first message a model's child process reads)."""

    plan: LoadPlan
    force: bool = False  # load even what the plan says will not fit
    queue_capacity: int = DEFAULT_QUEUE_CAPACITY  # requests that may wait beyond the sequences
    speculation: SpeculationConfig | None = None  # None: the plan's draft model, if any

    def resolved_speculation(self) -> SpeculationConfig:
        return resolve_speculation(self.plan, self.speculation)


# The signals every ExecutorLike emits, in the order a load emits them. ``phase_started``
# (LoadPhase), ``phase_progress`` (LoadPhase, 0..1), ``phase_finished`` (LoadPhase, seconds),
# ``ready()``, ``load_failed`` (EngineError), ``unloaded()``, ``worker_lost`` (EngineError: a
# split model's worker or process was lost; ``unloaded`` follows; never from an Executor).
SIGNALS = (
    "phase_started",
    "phase_progress",
    "phase_finished",
    "ready",
    "load_failed",
    "unloaded",
    "worker_lost",
)


class ReadyWait:
    """``wait_ready`` for a server that sets ``_ready_event`` once loading ends either way."""

    _ready_event: threading.Event
    load_error: EngineError | None

    def wait_ready(self, timeout: float | None = None) -> None:
        """Block until loaded; raise the load error if loading failed."""
        if not self._ready_event.wait(timeout):
            raise TimeoutError("the model did not finish loading in time")
        if self.load_error is not None:
            raise self.load_error


@runtime_checkable
class ExecutorLike(Protocol):
    """Serves one model: load it on ``start()``, then take requests from any thread.

    Results come back as Qt signals (emitted on the serving thread, so a receiver in another
    thread gets them queued) and on each request's ``RequestHandle``.
    """

    # Qt's bound signals (``SignalInstance``): ``connect``, ``emit``.
    phase_started: Any
    phase_progress: Any
    phase_finished: Any
    ready: Any
    load_failed: Any
    unloaded: Any
    worker_lost: Any

    plan: LoadPlan
    speculation: SpeculationConfig
    state: ExecutorState
    load_error: EngineError | None
    reported_memory: ReportedMemory | None  # llama.cpp's own buffer sizes, from the load's log
    chat_traits: ChatTraits | None  # set once loaded
    n_ctx_seq: int  # 0 until loaded
    n_seq: int
    lost_worker: bool  # an RPC worker was lost: the model is unloaded

    @property
    def has_vision(self) -> bool: ...

    def start(self) -> None: ...

    def wait_ready(self, timeout: float | None = None) -> None: ...

    def cancel_load(self) -> None: ...

    def submit(
        self, request: ChatRequest, connect: Callable[[RequestHandle], None] | None = None
    ) -> RequestHandle: ...

    def cancel(self, request_id: int) -> None: ...

    def request_stats(self) -> Future: ...

    def stats(self, timeout: float = 5.0) -> EngineStats: ...

    def measure(self, request: ChatRequest) -> Future: ...

    def request_unload(self) -> None: ...

    def wait(self) -> bool: ...
