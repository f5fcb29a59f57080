"""Who keeps the CPU busy: this process against every other program (psutil, no Qt).

Two clocks read at once make every figure here: the machine's busy CPU time (every
program's, from ``psutil.cpu_times``) and this process's own (``time.process_time``, every
thread). Between two readings the difference is what other programs used. Load averages
would lag by a minute and count this process's own decoding threads as someone else's.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import psutil

# Shorter intervals are mostly rounding: the system's counters tick every 10 ms per CPU.
MIN_INTERVAL_S = 0.2
# Other programs' load counts as taking a core once it keeps this much of one busy. Half:
# a program competing with our threads for the cores gets only its share of them (a
# program that alone keeps a core busy measures 0.67 beside two decoding threads on 2 cores).
CORE_TAKEN = 0.5
# The smoothing of ``CpuMeter.others``: a short burst (a page load) barely moves it, a
# program that keeps a core busy shows within seconds.
SMOOTHING_S = 8.0


@dataclass(frozen=True)
class CpuReading:
    """Both clocks at one moment, in seconds."""

    at: float  # time.monotonic()
    busy: float  # the machine's busy CPU time, every CPU together
    ours: float  # this process's CPU time, every thread together


def cpu_busy_seconds() -> float:
    """The machine's busy CPU time: everything but idle and I/O wait. Guest time is already
    counted in user time on Linux, so it is left out (as ``psutil.cpu_percent`` does)."""
    t = psutil.cpu_times()
    total = sum(t)
    total -= getattr(t, "guest", 0.0) + getattr(t, "guest_nice", 0.0)
    return total - t.idle - getattr(t, "iowait", 0.0)


def read_cpu() -> CpuReading:
    return CpuReading(time.monotonic(), cpu_busy_seconds(), time.process_time())


def logical_cpus() -> int:
    return psutil.cpu_count(logical=True) or os.cpu_count() or 1


def physical_cores() -> int:
    # None on some VMs and containers that hide the topology: the logical count then.
    return psutil.cpu_count(logical=False) or logical_cpus()


@dataclass(frozen=True)
class CpuShare:
    """CPU use over one interval, in CPUs' worth: 1.0 is one CPU busy the whole time."""

    seconds: float
    cpus: int  # logical CPUs of the machine
    total: float  # every program, this one included
    ours: float  # this process

    @property
    def others(self) -> float:
        """What every other program used (never below zero: the clocks round differently)."""
        return max(0.0, self.total - self.ours)

    def percent(self, cpus: float) -> float:
        """``cpus`` as a share of the whole machine, 0-100 (what the dashboard plots)."""
        return max(0.0, min(100.0, 100.0 * cpus / max(1, self.cpus)))


def share_between(
    before: CpuReading, after: CpuReading, cpus: int, min_interval: float = MIN_INTERVAL_S
) -> CpuShare | None:
    """The share between two readings; None when they are too close to say anything."""
    seconds = after.at - before.at
    if seconds < max(min_interval, 1e-3):
        return None
    total = min(float(cpus), max(0.0, (after.busy - before.busy) / seconds))
    ours = min(float(cpus), max(0.0, (after.ours - before.ours) / seconds))
    return CpuShare(seconds, cpus, total, ours)


def cores_taken(others: float, cores: int) -> int:
    """Physical cores other programs' load takes from us: each CPU's worth they keep busy
    lands on some core (on a machine with hyper-threads, beside one of ours)."""
    return max(0, min(cores, math.floor(others + 1.0 - CORE_TAKEN)))


@dataclass(frozen=True)
class CpuContention:
    """The CPU while a request was computed: other programs' load against our threads.

    ``slowed`` when our threads did not each have a core of their own: llama.cpp's threads
    meet at a barrier after every operation, so one thread waiting for a core stalls all
    of them, and decode drops to a fraction of its speed, not by a share of it.
    """

    seconds: float  # how long the request computed (admission to its end)
    others: float  # CPUs' worth other programs kept busy, on average
    ours: float  # CPUs' worth this process used
    cores: int  # physical cores of the machine
    threads: int  # threads llama.cpp computed with

    @property
    def free_cores(self) -> int:
        return self.cores - cores_taken(self.others, self.cores)

    @property
    def slowed(self) -> bool:
        return cores_taken(self.others, self.cores) > 0 and self.threads > self.free_cores


def contention(share: CpuShare | None, cores: int, threads: int) -> CpuContention | None:
    if share is None:
        return None
    return CpuContention(share.seconds, share.others, share.ours, cores, threads)


class CpuMeter:
    """Shares since the previous ``sample()``, and a smoothed view of other programs' load.

    Not thread-safe: one per user (the dashboard's telemetry, the load panel).
    ``min_interval``: a sample sooner than this after the previous one is None (a plot
    sampled four times a second accepts more noise than a decision). ``read`` and
    ``cpus`` stand in for the machine in tests.
    """

    def __init__(
        self,
        others: float = 0.0,
        *,
        min_interval: float = MIN_INTERVAL_S,
        read: Callable[[], CpuReading] = read_cpu,
        cpus: int | None = None,
    ) -> None:
        self._read = read
        self.min_interval = min_interval
        self.cpus = cpus if cpus is not None else logical_cpus()
        self._last = read()
        self._others = others  # the smoothed figure, seeded (e.g. from the snapshot's)
        self.latest: CpuShare | None = None

    @property
    def others(self) -> float:
        """Other programs' load, smoothed over about ``SMOOTHING_S`` seconds."""
        return self._others

    def sample(self) -> CpuShare | None:
        """The share since the previous sample (None, and nothing reset, when too soon)."""
        now = self._read()
        share = share_between(self._last, now, self.cpus, self.min_interval)
        if share is None:
            return None
        self._last = now
        self.latest = share
        weight = 1.0 - math.exp(-share.seconds / SMOOTHING_S)
        self._others += weight * (share.others - self._others)
        return share


def others_since(before: CpuReading, at_least: float) -> float:
    """Other programs' load since ``before``, waiting until ``at_least`` seconds have passed:
    one blocking measurement, for a snapshot that has no meter running before it (0.0
    for ``at_least`` 0: not measured)."""
    if at_least <= 0:
        return 0.0
    left = at_least - (time.monotonic() - before.at)
    if left > 0:
        time.sleep(left)
    share = share_between(before, read_cpu(), logical_cpus(), min_interval=min(at_least, MIN_INTERVAL_S))
    return share.others if share is not None else 0.0
