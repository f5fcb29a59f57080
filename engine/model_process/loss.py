"""Why a split model's child process ended unasked, in one line for the person using Hearth.

The child cannot always say: a guard's report (engine/rpc/guard.py) carries llama.cpp's
message, which names no worker, and a SIGKILL or a segfault says nothing at all. So the
parent asks the network: the plan's workers that no longer answer a ping are the lost ones.
"""

from __future__ import annotations

import signal
from concurrent.futures import ThreadPoolExecutor

from engine.base.errors import EngineError, ModelProcessEnded, WorkerUnavailable
from engine.planner import LoadPlan
from engine.rpc import guard
from engine.rpc.endpoint import parse_address
from engine.rpc.workers import ping


def unanswered(endpoints: tuple[str, ...]) -> list[str]:
    """The workers that no longer answer a ping, asked all at once (3 s at worst)."""
    if not endpoints:
        return []
    with ThreadPoolExecutor(len(endpoints)) as pool:
        answers = list(pool.map(lambda e: ping(parse_address(e))[0], endpoints))
    return [e for e, rtt in zip(endpoints, answers, strict=True) if rtt is None]


def loss_error(plan: LoadPlan, exit_status: int, reported: str | None) -> EngineError:
    """``WorkerUnavailable`` naming the workers gone, or for a worker that still answers but
    broke the protocol; else ``ModelProcessEnded`` with how the process ended.
    ``reported``: llama.cpp's message, when the child's guard sent one."""
    name = plan.model.display_name
    gone = unanswered(plan.workers)
    if gone:
        return WorkerUnavailable(
            f"Lost the worker at {', '.join(gone)}: {name} was unloaded and its replies stopped. "
            "Start the worker again, then load the model again."
        )
    if reported is not None or exit_status == guard.WORKER_LOST_EXIT:
        # A worker that answers a ping but broke the protocol (or a network that hiccuped).
        return WorkerUnavailable(
            f"A worker of {name} ({', '.join(plan.workers)}) stopped answering properly "
            f"({reported or 'llama.cpp lost it'}): the model was unloaded and its replies stopped. "
            "Load it again."
        )
    how = f"exit status {exit_status}"
    if exit_status < 0:
        try:
            how = f"signal {signal.Signals(-exit_status).name}"
        except ValueError:
            how = f"signal {-exit_status}"
    return ModelProcessEnded(
        f"The process running {name} ended unexpectedly ({how}): the model was unloaded and its "
        "replies stopped. Load it again."
    )
