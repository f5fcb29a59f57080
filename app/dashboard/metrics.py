"""The dashboard's memory: recent samples in ring buffers, a thinned archive of the session, CSV export.

Pure Python and numpy, no Qt, so every rule here is unit-tested without a display. Two
tables, because the two sources tick independently: ``telemetry`` (CPU, RAM, GPUs; sampled
on the GUI thread) and ``engine`` (``EngineStats`` answered by the executor between
batches, a few milliseconds later and sometimes not at all while a batch runs long).
"""

from __future__ import annotations

import csv
import math
import time
from array import array
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np

from engine import EngineStats, TelemetrySample

NAN = float("nan")

# Column names double as CSV headers, so they carry their unit.
CPU_PERCENT = "cpu_percent"
HEARTH_CPU_PERCENT = "hearth_cpu_percent"  # of the machine's whole CPU, like CPU_PERCENT
OTHERS_CPU_PERCENT = "other_programs_cpu_percent"
RAM_USED = "ram_used_bytes"
RAM_TOTAL = "ram_total_bytes"
PROCESS_RSS = "hearth_rss_bytes"

DECODE_TPS = "decode_tokens_per_s"
PREFILL_TPS = "prefill_tokens_per_s"
ACTIVE = "active_requests"
QUEUED = "queued_requests"
BATCH_FILL = "batch_fill_percent"
KV_USED = "kv_cells_used"
KV_TOTAL = "kv_cells_total"
PREFIX_HITS = "prefix_hits"
PREFIX_MISSES = "prefix_misses"
PREFIX_HIT_RATE = "prefix_hit_rate_percent"
TOKENS_REUSED = "tokens_reused"
COMPLETED = "completed_requests"
DRAFTED = "drafted_tokens"
ACCEPTED = "accepted_tokens"
ACCEPTANCE_RATE = "acceptance_rate_percent"
SCHEDULER_TICK = "scheduler_tick_us"


def gpu_column(index: int, field: str) -> str:
    """``field`` is one of utilization_percent, vram_used_bytes, vram_total_bytes, temperature_c, power_w."""
    return f"gpu{index}_{field}"


def kv_sequence_column(sequence_id: int) -> str:
    return f"kv_seq{sequence_id}_cells"


# Engine counters that only grow while one model is loaded. The history accumulates their
# deltas, so a model switch (counters restart at zero) neither loses nor double-counts.
_COUNTERS: tuple[tuple[str, str], ...] = (
    (PREFIX_HITS, "prefix_hits"),
    (PREFIX_MISSES, "prefix_misses"),
    (TOKENS_REUSED, "tokens_reused"),
    (COMPLETED, "completed_requests"),
    (DRAFTED, "drafted_tokens"),
    (ACCEPTED, "accepted_tokens"),
)


class _Archive:
    """One row per ``interval`` seconds for the whole session, in bounded memory.

    When ``max_rows`` is reached every other row is dropped and the interval doubles, so
    an all-day session keeps a coarser but complete picture in a few megabytes.
    Column-oriented ``array('d')``: 8 bytes a value, against ~30 for a float in a tuple.
    """

    def __init__(self, interval: float, max_rows: int) -> None:
        self.interval = interval
        self.max_rows = max(2, max_rows)
        self.times = array("d")
        self.columns: dict[str, array] = {}
        self._next = -math.inf

    def offer(self, t: float, values: Mapping[str, float]) -> None:
        if t < self._next:
            return
        self._next = t + self.interval
        n = len(self.times)
        for name in values:
            if name not in self.columns:
                self.columns[name] = array("d", [NAN]) * n
        self.times.append(t)
        for name, column in self.columns.items():
            column.append(values.get(name, NAN))
        if len(self.times) >= self.max_rows:
            self.times = self.times[::2]
            self.columns = {name: column[::2] for name, column in self.columns.items()}
            self.interval *= 2


class SeriesTable:
    """Timestamped rows of named float columns: a ring of the newest ``capacity`` rows
    plus a thinned archive of everything older.

    The ring is *mirrored*: each value is written at ``i`` and ``i + capacity``, so the
    rows in time order are always one contiguous slice. ``times()`` and ``series()`` return
    numpy views of it (no copy), which plots hand straight to ``setData`` several times a
    second. The views are valid until the next ``append``.
    """

    def __init__(self, capacity: int, archive_interval: float = 1.0, archive_rows: int = 20_000) -> None:
        if capacity < 2:
            raise ValueError("capacity must be at least 2")
        self.capacity = capacity
        self._times = np.full(2 * capacity, NAN)
        self._columns: dict[str, np.ndarray] = {}
        self._head = 0  # next write position in [0, capacity)
        self._count = 0
        self._archive = _Archive(archive_interval, archive_rows)
        self._archive_settings = (archive_interval, archive_rows)

    def __len__(self) -> int:
        return self._count

    def __contains__(self, name: object) -> bool:
        return name in self._columns

    @property
    def names(self) -> tuple[str, ...]:
        """Column names in the order they first appeared."""
        return tuple(self._columns)

    def _window(self) -> slice:
        start = self._head if self._count == self.capacity else 0
        return slice(start, start + self._count)

    def times(self) -> np.ndarray:
        return self._times[self._window()]

    def series(self, name: str) -> np.ndarray:
        """The column in time order; all-NaN (same length as ``times()``) for an unknown name."""
        column = self._columns.get(name)
        if column is None:
            return np.full(self._count, NAN)
        return column[self._window()]

    def latest(self, name: str) -> float:
        """The newest value of a column, NaN when there is none."""
        column = self._columns.get(name)
        if column is None or not self._count:
            return NAN
        return float(column[(self._head - 1) % self.capacity])

    def latest_time(self) -> float:
        return float(self._times[(self._head - 1) % self.capacity]) if self._count else NAN

    def append(self, t: float, values: Mapping[str, float], archive: bool = True) -> None:
        for name in values:
            if name not in self._columns:
                self._columns[name] = np.full(2 * self.capacity, NAN)
        i, j = self._head, self._head + self.capacity
        self._times[i] = self._times[j] = t
        for name, column in self._columns.items():
            column[i] = column[j] = values.get(name, NAN)
        self._head = (self._head + 1) % self.capacity
        self._count = min(self._count + 1, self.capacity)
        if archive:
            self._archive.offer(t, values)

    def clear(self) -> None:
        self._times[:] = NAN
        self._columns.clear()
        self._head = self._count = 0
        self._archive = _Archive(*self._archive_settings)

    def export_rows(self) -> Iterator[tuple[float, dict[str, float]]]:
        """The session in time order: archived rows older than the ring, then every ring row.

        Rows without a single finite value (gap marks) are skipped.
        """
        times = self.times()
        oldest = float(times[0]) if len(times) else math.inf
        archive = self._archive
        for k, t in enumerate(archive.times):
            if t >= oldest:
                break
            row = {name: column[k] for name, column in archive.columns.items()}
            if any(math.isfinite(v) for v in row.values()):
                yield t, row
        window = self._window()
        columns = {name: column[window] for name, column in self._columns.items()}
        for k, t in enumerate(times):
            row = {name: float(column[k]) for name, column in columns.items()}
            if any(math.isfinite(v) for v in row.values()):
                yield float(t), row


@dataclass(frozen=True)
class SessionTotals:
    """Engine counters summed over the session (across model switches)."""

    prefix_hits: int = 0
    prefix_misses: int = 0
    tokens_reused: int = 0
    completed_requests: int = 0
    drafted_tokens: int = 0
    accepted_tokens: int = 0

    @property
    def prefix_hit_rate(self) -> float | None:
        """Hits / (hits + misses), 0..1; None before the first admitted request."""
        lookups = self.prefix_hits + self.prefix_misses
        return self.prefix_hits / lookups if lookups else None

    @property
    def acceptance_rate(self) -> float | None:
        """Accepted / drafted tokens, 0..1; None when nothing was drafted."""
        return self.accepted_tokens / self.drafted_tokens if self.drafted_tokens else None


class MetricsHistory:
    """Recent telemetry and engine statistics, with the series the dashboard plots.

    ``window_s / interval_s`` rows are kept at full resolution per table (5 minutes at
    250 ms: 1200 rows); older rows survive in a thinned archive (1 s apart, coarser
    after ~5 hours) so ``to_csv`` covers the whole session.
    """

    def __init__(
        self,
        window_s: float = 300.0,
        interval_s: float = 0.25,
        archive_interval_s: float = 1.0,
        archive_rows: int = 20_000,
    ) -> None:
        if window_s <= 0 or interval_s <= 0:
            raise ValueError("window and interval must be positive")
        self.window_s = window_s
        self.interval_s = interval_s
        capacity = math.ceil(window_s / interval_s) + 2
        self.telemetry = SeriesTable(capacity, archive_interval_s, archive_rows)
        self.engine = SeriesTable(capacity, archive_interval_s, archive_rows)
        # One (wall clock, monotonic) pair: samples carry time.monotonic(), CSV readers want dates.
        self._wall0 = time.time()
        self._mono0 = time.monotonic()
        self._gpu_indices: tuple[int, ...] = ()
        self._last_counters: dict[str, int] | None = None
        self._totals: dict[str, int] = {column: 0 for column, _ in _COUNTERS}
        self.latest_telemetry: TelemetrySample | None = None
        self.latest_stats: EngineStats | None = None

    # -- input -------------------------------------------------------------------------------

    def add_telemetry(self, sample: TelemetrySample) -> None:
        values: dict[str, float] = {
            CPU_PERCENT: sample.cpu_percent,
            RAM_USED: float(sample.ram_used),
            RAM_TOTAL: float(sample.ram_total),
            PROCESS_RSS: float(sample.process_rss),
            HEARTH_CPU_PERCENT: _num(sample.hearth_cpu_percent),
            OTHERS_CPU_PERCENT: _num(sample.others_cpu_percent),
        }
        for gpu in sample.gpus:
            values[gpu_column(gpu.index, "utilization_percent")] = _num(gpu.utilization_percent)
            values[gpu_column(gpu.index, "vram_used_bytes")] = float(gpu.vram_used)
            values[gpu_column(gpu.index, "vram_total_bytes")] = float(gpu.vram_total)
            values[gpu_column(gpu.index, "temperature_c")] = _num(gpu.temperature_c)
            values[gpu_column(gpu.index, "power_w")] = _num(gpu.power_w)
        indices = tuple(g.index for g in sample.gpus)
        if indices and indices != self._gpu_indices:
            self._gpu_indices = tuple(sorted(set(self._gpu_indices) | set(indices)))
        self.telemetry.append(sample.timestamp, values)
        self.latest_telemetry = sample

    def add_engine_stats(self, stats: EngineStats, timestamp: float | None = None) -> None:
        """Record one ``EngineStats``; ``timestamp`` (time.monotonic()) defaults to now."""
        t = time.monotonic() if timestamp is None else timestamp
        previous = self._last_counters
        current = {column: int(getattr(stats, attr)) for column, attr in _COUNTERS}
        deltas: dict[str, int] = {}
        for column, value in current.items():
            before = None if previous is None else previous.get(column)
            # A counter that went down belongs to a new model that started from zero.
            delta = value if before is None or value < before else value - before
            deltas[column] = delta
            self._totals[column] += delta
        self._last_counters = current

        totals = self.totals
        hit_rate = totals.prefix_hit_rate
        drafted, accepted = deltas[DRAFTED], deltas[ACCEPTED]
        values: dict[str, float] = {
            DECODE_TPS: stats.decode_tokens_per_second,
            PREFILL_TPS: stats.prefill_tokens_per_second,
            ACTIVE: float(stats.active_requests),
            QUEUED: float(stats.queue_depth),
            BATCH_FILL: 100.0 * stats.batch_fill,
            KV_USED: float(stats.cells_used),
            KV_TOTAL: float(stats.n_ctx),
            PREFIX_HITS: float(totals.prefix_hits),
            PREFIX_MISSES: float(totals.prefix_misses),
            PREFIX_HIT_RATE: NAN if hit_rate is None else 100.0 * hit_rate,
            TOKENS_REUSED: float(totals.tokens_reused),
            COMPLETED: float(totals.completed_requests),
            DRAFTED: float(totals.drafted_tokens),
            ACCEPTED: float(totals.accepted_tokens),
            # Per interval, not cumulative: shows the rate moving as the text changes.
            ACCEPTANCE_RATE: 100.0 * accepted / drafted if drafted > 0 else NAN,
            SCHEDULER_TICK: stats.scheduler_tick_us,
        }
        for seq in stats.sequences:
            values[kv_sequence_column(seq.sequence_id)] = float(seq.cells_used)
        self.engine.append(t, values)
        self.latest_stats = stats

    def reset_engine(self) -> None:
        """A different model (or none) from now on: its counters start from zero.

        Session totals and the recorded history stay.
        """
        self._last_counters = None
        self.latest_stats = None

    def mark_gap(self, timestamp: float | None = None) -> None:
        """Break the plotted lines here (sampling paused while the view was hidden).

        Adds an all-NaN row to each table; plots draw lines only between finite points,
        and the CSV skips such rows.
        """
        t = time.monotonic() if timestamp is None else timestamp
        for table in (self.telemetry, self.engine):
            if len(table) and not _is_gap(table):
                table.append(t, {}, archive=False)

    def clear(self) -> None:
        self.telemetry.clear()
        self.engine.clear()
        self._gpu_indices = ()
        self._last_counters = None
        self._totals = {column: 0 for column, _ in _COUNTERS}
        self.latest_telemetry = None
        self.latest_stats = None

    # -- derived -----------------------------------------------------------------------------

    @property
    def gpu_indices(self) -> tuple[int, ...]:
        """Every GPU index seen in a telemetry sample, sorted."""
        return self._gpu_indices

    @property
    def totals(self) -> SessionTotals:
        return SessionTotals(**{attr: self._totals[column] for column, attr in _COUNTERS})

    @property
    def speculation_seen(self) -> bool:
        return self._totals[DRAFTED] > 0

    def wall_time(self, monotonic: float) -> datetime:
        return datetime.fromtimestamp(self._wall0 + (monotonic - self._mono0)).astimezone()

    # -- export ------------------------------------------------------------------------------

    def to_csv(self, path: str | Path) -> int:
        """Write every recorded row of both tables to one CSV; returns the number of data rows.

        Columns: ``time_s`` (seconds since the history began), ``clock`` (local ISO time),
        ``source`` (telemetry or engine), then every telemetry column and every engine
        column. A row fills only its own source's columns; values it lacks stay empty.
        """
        tel_names = self.telemetry.names
        eng_names = self.engine.names
        rows = sorted(
            [(t, "telemetry", row) for t, row in self.telemetry.export_rows()]
            + [(t, "engine", row) for t, row in self.engine.export_rows()],
            key=lambda r: r[0],
        )
        path = Path(path)
        with path.open("w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["time_s", "clock", "source", *tel_names, *eng_names])
            for t, source, row in rows:
                names = tel_names if source == "telemetry" else eng_names
                cells = [_cell(row.get(name, NAN)) for name in names]
                blank = [""] * (len(eng_names) if source == "telemetry" else len(tel_names))
                writer.writerow(
                    [
                        f"{t - self._mono0:.3f}",
                        self.wall_time(t).isoformat(timespec="milliseconds"),
                        source,
                        *(cells + blank if source == "telemetry" else blank + cells),
                    ]
                )
        return len(rows)


def _num(value: float | None) -> float:
    return NAN if value is None else float(value)


def _is_gap(table: SeriesTable) -> bool:
    return all(not math.isfinite(table.latest(name)) for name in table.names)


def _cell(value: float) -> str:
    if not math.isfinite(value):
        return ""
    if value == int(value) and abs(value) < 2**53:
        return str(int(value))  # byte and token counts stay exact
    return f"{value:.4f}".rstrip("0")


__all__ = [
    "MetricsHistory",
    "SeriesTable",
    "SessionTotals",
    "gpu_column",
    "kv_sequence_column",
]
