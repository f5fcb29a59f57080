"""How many CPU threads llama.cpp computes with: one per physical core that other programs
leave free, unless the user said otherwise."""

from __future__ import annotations

from dataclasses import dataclass

from engine.base.units import plural
from engine.machine.cpu_load import cores_taken
from engine.machine.hardware import HardwareSnapshot
from engine.planner.load_plan import MAX_THREADS, InvalidLoadRequest, LoadRequest


@dataclass(frozen=True)
class ThreadChoice:
    threads: int
    reason: str | None  # a line for the plan, when the choice needs one


def check_threads(request: LoadRequest) -> None:
    for label, value in (("Threads", request.threads), ("Default threads", request.default_threads)):
        if value is not None and not 1 <= value <= MAX_THREADS:
            raise InvalidLoadRequest(f"{label} must be 1 to {MAX_THREADS} (got {value})")


def choose_threads(request: LoadRequest, hardware: HardwareSnapshot) -> ThreadChoice:
    """The request's own threads, else its default (Settings), else the planner's: one per
    physical core, less the cores other programs keep busy (llama.cpp's threads wait for
    each other after every operation, so a thread without a core of its own stalls them
    all: on 2 cores with one busy, 1 thread decodes several times faster than 2)."""
    cores = max(1, hardware.physical_cores)
    taken = cores_taken(hardware.cpu_busy_elsewhere, cores)
    free = max(1, cores - taken)
    busy = f"other programs keep {plural(taken, 'core')} of {cores} busy"
    chosen, whose = request.threads, "your setting"
    if chosen is None and request.default_threads is not None:
        chosen, whose = request.default_threads, "the default in Settings"
    if chosen is None:
        if taken:
            return ThreadChoice(free, f"Threads {free} of {cores} cores: {busy}.")
        return ThreadChoice(cores, None)
    if chosen > cores:
        return ThreadChoice(
            chosen,
            f"Threads {chosen} ({whose}) on {plural(cores, 'core')}: threads that wait for a core "
            f"slow the others down; {free} would be faster.",
        )
    if taken and chosen > free:
        return ThreadChoice(
            chosen, f"Threads {chosen} ({whose}): {busy}; {free} would be faster while they run."
        )
    return ThreadChoice(chosen, None)
