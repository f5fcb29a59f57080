"""What the parent and the child of a split model say to each other (engine/model_process/process.py,
engine/model_process/child.py).

A split model runs in a child process of its own, because llama.cpp's RPC client ends the
process that loses a worker (engine/rpc/guard.py). The two talk over one socketpair
wrapped in ``multiprocessing.connection.Connection``: each message is one of the
dataclasses below, pickled. Requests, events, stats and errors are the engine's own values
(every ``EngineError`` pickles: ``EngineError.__reduce__``), so what the parent publishes on
a ``RequestHandle`` is exactly what the child's executor published.

The socketpair is unnamed and its other end is inherited by the child only, so no one else
can connect to it: no address and no authkey are needed.
"""

from __future__ import annotations

import copyreg
import sys
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from engine.base.errors import EngineError
from engine.chat.traits import ChatTraits
from engine.native.llama_log import ReportedMemory
from engine.planner import LoadPhase, LoadPlan
from engine.requests.request import ChatRequest, Event
from engine.speculation.policy import SpeculationConfig


# ModelInfo keeps its metadata read-only in MappingProxyType, which pickle refuses: a
# plan sent to the child carries it as a dict and gets it back read-only.
def _read_only(items: dict) -> MappingProxyType:
    return MappingProxyType(items)


copyreg.pickle(MappingProxyType, lambda proxy: (_read_only, (dict(proxy),)))

CHILD_FLAG = "--rpc-model"  # `hearth --rpc-model FD` runs model_child.child_main() in a bundle


def child_command(fd: int) -> list[str]:
    """The same interpreter (and so the same llama.cpp build) runs the child."""
    if getattr(sys, "frozen", False):
        return [sys.executable, CHILD_FLAG, str(fd)]
    return [sys.executable, "-m", "engine.model_process.child", str(fd)]


# -- parent → child ------------------------------------------------------------------


@dataclass(frozen=True)
class Start:
    """The first message: what to load, as ``Executor(plan, ...)`` takes it."""

    plan: LoadPlan
    force: bool
    queue_capacity: int
    speculation: SpeculationConfig


@dataclass(frozen=True)
class SubmitRequest:
    request: ChatRequest  # its request_id travels with it: events come back under it


@dataclass(frozen=True)
class CancelRequest:
    request_id: int


@dataclass(frozen=True)
class AskStats:
    token: int  # answered by an Answer with the same token


@dataclass(frozen=True)
class AskMeasure:
    token: int
    request: ChatRequest


@dataclass(frozen=True)
class CancelLoad:
    pass


@dataclass(frozen=True)
class UnloadModel:
    pass


ToChild = Start | SubmitRequest | CancelRequest | AskStats | AskMeasure | CancelLoad | UnloadModel


# -- child → parent ------------------------------------------------------------------


@dataclass(frozen=True)
class PhaseStarted:
    phase: LoadPhase


@dataclass(frozen=True)
class PhaseProgress:
    phase: LoadPhase
    fraction: float


@dataclass(frozen=True)
class PhaseFinished:
    phase: LoadPhase
    seconds: float


@dataclass(frozen=True)
class Loaded:
    """The executor is READY: what the parent's properties answer from now on."""

    reported_memory: ReportedMemory | None
    has_vision: bool
    chat_traits: ChatTraits | None
    n_ctx_seq: int
    n_seq: int


@dataclass(frozen=True)
class LoadFailedMessage:
    error: EngineError


@dataclass(frozen=True)
class RequestEvent:
    request_id: int
    event: Event


@dataclass(frozen=True)
class Answer:
    token: int
    value: Any = None  # EngineStats or PromptSize
    error: BaseException | None = None


@dataclass(frozen=True)
class WorkerLost:
    """llama.cpp aborted on a lost worker (its message); the child ends right after."""

    message: str


@dataclass(frozen=True)
class Unloaded:
    """The executor unloaded as asked and freed everything; the child ends right after."""


ToParent = (
    PhaseStarted
    | PhaseProgress
    | PhaseFinished
    | Loaded
    | LoadFailedMessage
    | RequestEvent
    | Answer
    | WorkerLost
    | Unloaded
)
