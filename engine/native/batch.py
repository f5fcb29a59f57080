"""A llama_batch over numpy arrays Hearth owns, filled in place every tick.

``llama_batch_init`` allocates per batch and ``llama_batch_get_one`` cannot mix sequences;
one struct over reused arrays costs nothing per tick. Never ``llama_batch_free`` it.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np


class NativeBatch:
    """``capacity`` rows (n_batch), at most ``max_outputs`` of them with logits
    (n_outputs_max): llama.cpp aborts on a batch over either, so neither gets through."""

    def __init__(self, capacity: int, max_outputs: int | None = None) -> None:
        import llama_cpp as ll

        self.capacity = capacity
        self.max_outputs = capacity if max_outputs is None else max_outputs
        self.n_outputs = 0
        self.token = np.zeros(capacity, dtype=np.int32)
        self.pos = np.zeros(capacity, dtype=np.int32)
        self.n_seq_id = np.ones(capacity, dtype=np.int32)
        self.seq_id = np.zeros(capacity, dtype=np.int32)
        self.logits = np.zeros(capacity, dtype=np.int8)
        # One seq id per row: row i's pointer points at seq_id[i].
        self._seq_ptrs = (self.seq_id.ctypes.data + 4 * np.arange(capacity, dtype=np.uint64)).astype(
            np.uint64
        )
        self.struct = ll.llama_batch()
        self.struct.token = self.token.ctypes.data_as(ctypes.POINTER(ll.llama_token))
        self.struct.embd = ctypes.POINTER(ctypes.c_float)()
        self.struct.pos = self.pos.ctypes.data_as(ctypes.POINTER(ll.llama_pos))
        self.struct.n_seq_id = self.n_seq_id.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))
        self.struct.seq_id = ctypes.cast(
            self._seq_ptrs.ctypes.data, ctypes.POINTER(ctypes.POINTER(ll.llama_seq_id))
        )
        self.struct.logits = self.logits.ctypes.data_as(ctypes.POINTER(ctypes.c_int8))
        self.n_tokens = 0

    def clear(self) -> None:
        self.n_tokens = 0
        self.n_outputs = 0

    def add_run(self, seq_id: int, position: int, tokens: Any, logit_rows: range) -> None:
        """Append ``tokens`` of one sequence at consecutive positions from ``position``."""
        n = len(tokens)
        start = self.n_tokens
        end = start + n
        if end > self.capacity:
            # llama.cpp aborts the process on a batch over n_batch: never let one through.
            raise ValueError(f"batch overflow: {end} rows > {self.capacity}")
        outputs = self.n_outputs + len(logit_rows)
        if outputs > self.max_outputs:
            raise ValueError(f"batch overflow: {outputs} logit rows > {self.max_outputs}")
        self.token[start:end] = tokens
        self.pos[start:end] = np.arange(position, position + n, dtype=np.int32)
        self.seq_id[start:end] = seq_id
        self.logits[start:end] = 0
        for row in logit_rows:
            self.logits[row] = 1
        self.n_outputs = outputs
        self.n_tokens = end

    def native(self) -> Any:
        self.struct.n_tokens = self.n_tokens
        return self.struct
