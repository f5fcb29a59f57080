"""The executor's side of a KV pool the conversations share (``kv_unified``): the numbers the
scheduler's pure rules (``engine.scheduler.cell_pool``) read, and their decisions carried out
on the native memory. Executor thread only."""

from __future__ import annotations

from collections.abc import Mapping

from engine.base.errors import EngineError
from engine.requests.events import DecodeFailed
from engine.runtime.active_request import ActiveRequest
from engine.runtime.native_model import NativeModel
from engine.scheduler import SequencePool, WorkKind
from engine.scheduler.cell_pool import PoolUse, admits, make_room


class PoolOutgrown(DecodeFailed):
    """A conversation needed cells while every cell of the shared pool was held."""


def outgrown_message(total: int) -> str:
    return (
        f"The conversations being answered filled the memory for conversations ({total:,} tokens); "
        "this one, the longest, stopped. Load with more memory for conversations."
    )


class SharedCells:
    """Admission and room-making for ``native``'s shared pool of ``native.n_ctx`` cells."""

    def __init__(self, native: NativeModel, pool: SequencePool) -> None:
        self._native = native
        self._pool = pool
        self.total = native.n_ctx
        self.evicted = 0  # cached prefixes dropped for room, since load

    def use(self, active: Mapping[int, ActiveRequest]) -> PoolUse:
        """Cells held now: active sequences' positions, and what each available sequence's KV
        still holds (cached prefixes), least recently used first."""
        held = {seq: a.progress.n_past for seq, a in active.items()}
        cells = self._native.cells
        cached = tuple(
            (seq, n) for seq in reversed(self._pool.available_ids()) if (n := cells(seq)) > 0
        )
        return PoolUse(self.total, held, cached)

    def admits(self, active: Mapping[int, ActiveRequest], prompt_cells: int) -> bool:
        """Whether a prompt of ``prompt_cells`` may start now (it waits otherwise)."""
        if not active:
            return True  # alone it may use every cell: its limit is within the pool
        promised = sum(
            a.progress.prompt.end.native_position - a.progress.cursor.native_position
            for a in active.values()
        )
        held = {seq: a.progress.n_past for seq, a in active.items()}
        return admits(PoolUse(self.total, held), prompt_cells, promised)

    def make_room(
        self, active: Mapping[int, ActiveRequest], n_batch: int
    ) -> tuple[int, list[tuple[ActiveRequest, EngineError]]]:
        """Evict cached prefixes the next batch needs; the rows it may plan, and the requests
        that outgrew the pool (the caller fails them, which frees their cells)."""
        decoding: dict[int, int] = {}
        rows = media = 0
        for seq, a in active.items():
            candidate = a.progress.candidate()
            if candidate is None:
                continue
            if candidate.kind is WorkKind.DECODE:
                decoding[seq] = 1
                rows += 1 + candidate.draft_rows
            elif candidate.kind is WorkKind.PREFILL:
                rows += candidate.remaining
            else:
                media += candidate.remaining
        if not rows and not media:
            return n_batch, []
        use = self.use(active)
        wanted = min(rows, n_batch) + media
        if wanted <= use.free:
            return n_batch, []
        room = make_room(use, wanted, decoding)
        draft = self._native.draft
        for seq in room.evict:
            self._native.forget(seq)
            if draft is not None:  # its pool is as large: it holds what the target holds
                draft.release(seq)
            self._pool.invalidate(seq)
            self.evicted += 1
        failed = [(active[seq], PoolOutgrown(outgrown_message(self.total))) for seq in room.fail]
        return min(n_batch, room.capacity), failed
