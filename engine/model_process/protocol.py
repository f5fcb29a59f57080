"""What the parent and the child of a split model say to each other (engine/model_process/process.py,
engine/model_process/child.py).

A split model runs in a child process of its own, because llama.cpp's RPC client ends the
process that loses a worker (engine/rpc/guard.py). The two talk over one socketpair
wrapped in ``multiprocessing.connection.Connection``, in the executor's own vocabulary,
pickled: the parent sends a ``LoadOrder`` (engine/runtime/surface.py), then the executor's
commands themselves (engine/runtime/commands.py: ``Submit`` without its handle, ``Observe``
and ``Measure`` with a token in place of their future, ``Cancel``, ``Unload``), plus
``CancelLoad``, which an executor takes as a flag rather than a command. What comes back is
the child's, declared below: its executor's signals, each request's events and the answers
to its tokens. Requests, events, stats and errors are the engine's own values (every
``EngineError`` pickles: ``EngineError.__reduce__``), so what the parent publishes on a
``RequestHandle`` is exactly what the child's executor published.

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
from engine.requests.events import Event
from engine.runtime.commands import Cancel, Measure, Observe, Submit, Unload
from engine.runtime.surface import LoadOrder


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


# -- parent → child: a LoadOrder, then the executor's commands, and this ------------------


@dataclass(frozen=True)
class CancelLoad:
    """Stop a load in progress (``Executor.cancel_load``: a flag the loader polls, which no
    command could reach while the executor thread is loading)."""


ToChild = LoadOrder | Submit | Cancel | Observe | Measure | Unload | CancelLoad


# -- child → parent: what the child's executor said ------------------------------------

# The executor's signals the parent re-emits as they come; the others change its state.
PHASE_SIGNALS = ("phase_started", "phase_progress", "phase_finished")


@dataclass(frozen=True)
class ChildSignal:
    """One of the child's executor's ``PHASE_SIGNALS``, with its arguments."""

    name: str
    args: tuple


@dataclass(frozen=True)
class ChildReady:
    """The executor is READY: what the parent's properties answer from now on."""

    reported_memory: ReportedMemory | None
    has_vision: bool
    chat_traits: ChatTraits | None
    n_ctx_seq: int
    n_seq: int


@dataclass(frozen=True)
class ChildLoadFailed:
    error: EngineError


@dataclass(frozen=True)
class ChildEvent:
    """One event of the request submitted under ``request_id``."""

    request_id: int
    event: Event


@dataclass(frozen=True)
class ChildAnswer:
    """The answer to the ``Observe`` or ``Measure`` sent with ``token``."""

    token: int
    value: Any = None  # EngineStats or PromptSize
    error: BaseException | None = None


@dataclass(frozen=True)
class ChildLostWorker:
    """llama.cpp aborted on a lost worker (its message); the child ends right after."""

    message: str


@dataclass(frozen=True)
class ChildUnloaded:
    """The executor unloaded as asked and freed everything; the child ends right after."""


ToParent = (
    ChildSignal | ChildReady | ChildLoadFailed | ChildEvent | ChildAnswer | ChildLostWorker | ChildUnloaded
)
