"""One KV pool the conversations share (llama.cpp's ``kv_unified``): who gets its cells.

With a shared pool a conversation may grow to the longest-conversation limit, but all of
them together hold at most the pool's cells, and the cached prefixes of finished replies
sit in the same cells. The rules (docs/scheduler-rules.md, "A shared KV pool"):

- **Admission by cells.** A waiting request is admitted only when its prompt's cells fit in
  what active requests neither hold nor will hold for the prompts they are still reading;
  cached prefixes count as free, since they are evicted for it. Otherwise it waits, in order.
- **Eviction before refusal.** Cells a batch needs beyond the free ones come from cached
  prefixes, least recently used first.
- **Prefill waits, decode goes first.** When eviction cannot make room, the batch is cut to
  the cells left: decode rows are planned first, so prompt rows and drafts are what waits.
- **Outgrowing fails alone.** When even the decode rows do not fit, the active request
  holding the most cells fails (one line) and its cells are freed; the others go on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class PoolUse:
    """The pool now: ``held`` cells of each active sequence, ``cached`` (sequence, cells) of
    each cached prefix, least recently used first."""

    total: int
    held: Mapping[int, int] = field(default_factory=dict)
    cached: tuple[tuple[int, int], ...] = ()

    def __post_init__(self) -> None:
        if self.total < 1:
            raise ValueError(f"a pool needs cells, got {self.total}")
        if any(n < 0 for n in self.held.values()) or any(n < 0 for _, n in self.cached):
            raise ValueError("negative cells held")

    @property
    def held_cells(self) -> int:
        return sum(self.held.values())

    @property
    def cached_cells(self) -> int:
        return sum(n for _, n in self.cached)

    @property
    def free(self) -> int:
        """Cells no sequence holds (cached prefixes hold theirs until evicted)."""
        return max(0, self.total - self.held_cells - self.cached_cells)


@dataclass(frozen=True, slots=True)
class Room:
    """What to do before a batch: ``evict`` these cached prefixes, ``fail`` these active
    sequences (each outgrew the pool), and plan at most ``capacity`` rows."""

    capacity: int
    evict: tuple[int, ...] = ()
    fail: tuple[int, ...] = ()


def admits(use: PoolUse, prompt_cells: int, promised: int = 0) -> bool:
    """Whether a prompt needing ``prompt_cells`` new cells may start now; ``promised``: the
    cells active sequences still need for the rest of their prompts."""
    return prompt_cells <= use.total - use.held_cells - promised


def make_room(use: PoolUse, wanted: int, decoding: Mapping[int, int]) -> Room:
    """Room for a batch that would like ``wanted`` rows, of which ``decoding`` (rows by
    sequence: the pending token, drafts not counted) must run for anyone to go on."""
    free = use.free
    evict: list[int] = []
    cached = list(use.cached)
    while free < wanted and cached:
        sequence_id, cells = cached.pop(0)
        evict.append(sequence_id)
        free += cells
    held = dict(use.held)
    needed = sum(decoding.values())
    fail: list[int] = []
    # Work waits on cells nobody will free: the biggest holder makes way, alone.
    while held and (free < needed or (wanted and not free)):
        victim = max(held, key=lambda s: (held[s], s))
        fail.append(victim)
        free += held.pop(victim)
        needed -= decoding.get(victim, 0)
    return Room(min(wanted, free), tuple(evict), tuple(fail))
