"""A draft model for speculative decoding: whether it may draft for a target (their
vocabularies, compared from the GGUF headers before anything native loads), and its own
llama.cpp context (executor thread only). The policy that decides how far to draft is in
``engine/speculation/policy.py``."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from engine.base.errors import Cancelled, EngineError, LoadFailed
from engine.catalog import ModelInfo, inspect_model, read_token_table
from engine.native.context_params import context_params
from engine.planner import cells_per_sequence
from engine.scheduler import common_token_prefix

if TYPE_CHECKING:
    from engine.native.batch import NativeBatch
    from engine.planner import LlamaParams

log = logging.getLogger("hearth.speculative")

CHECKED_LEADING_TOKENS = 256
# gguf.TokenType: UNKNOWN, CONTROL, USER_DEFINED. Their strings are what chat templates and
# stop handling match on, so a draft that disagrees about them would be wrong exactly where
# a turn ends.
SPECIAL_TOKEN_TYPES = frozenset({2, 3, 4})


class IncompatibleDraft(EngineError):
    """A draft model whose vocabulary does not match the model it should draft for."""

    def __init__(self, draft_name: str, target_name: str, reason: str) -> None:
        self.reason = reason
        super().__init__(f"{draft_name} cannot draft for {target_name}: {reason}.")


def check_draft_compatible(
    target: ModelInfo,
    draft: ModelInfo,
    target_path: Path | str | None = None,
    draft_path: Path | str | None = None,
) -> None:
    """Raise ``IncompatibleDraft`` unless ``draft`` can propose tokens for ``target``.

    Header-only (no native load). Stricter than llama.cpp's own check (which allows vocab
    sizes 128 apart): same tokenizer, same vocabulary size, same BOS/EOS ids, and the same
    token strings for the first 256 ids and every special token of either model. Both
    contexts then speak the same ids for everything the engine treats specially.
    """
    target_path = Path(target_path) if target_path is not None else target.path
    draft_path = Path(draft_path) if draft_path is not None else draft.path

    draft_name, target_name = draft.display_name, target.display_name
    if draft_name == target_name and draft_path.name != target_path.name:
        draft_name, target_name = draft_path.name, target_path.name  # say which file is which

    def refuse(reason: str) -> IncompatibleDraft:
        return IncompatibleDraft(draft_name, target_name, reason)

    if draft.is_projector:
        raise refuse("it is a vision projector, not a language model")
    if target.tokenizer_model != draft.tokenizer_model:
        raise refuse(
            f"the draft model's tokenizer is {draft.tokenizer_model!r}, "
            f"the model's {target.tokenizer_model!r}"
        )
    if not target.vocab_size or not draft.vocab_size:
        raise refuse("a vocabulary is missing")
    if target.vocab_size != draft.vocab_size:
        raise refuse(
            f"the draft model's vocabulary has {draft.vocab_size} tokens, the model's {target.vocab_size}"
        )
    for what, mine, theirs in (
        ("BOS", target.bos_token_id, draft.bos_token_id),
        ("EOS", target.eos_token_id, draft.eos_token_id),
    ):
        if mine != theirs:
            raise refuse(f"the draft model's {what} token is {theirs}, the model's {mine}")

    ours = read_token_table(target_path)
    theirs = read_token_table(draft_path)
    if ours.count != theirs.count:  # the ModelInfo came from another file than the path
        raise refuse(f"the draft model's vocabulary has {theirs.count} tokens, the model's {ours.count}")
    if ours.same_strings(theirs):
        return
    checked = sorted(
        set(range(min(CHECKED_LEADING_TOKENS, ours.count))) | ours.special_tokens() | theirs.special_tokens()
    )
    for i in checked:
        a, b = ours.token(i), theirs.token(i)
        if a != b:
            raise refuse(f"token {i} differs: {_text(a)!r} in the model, {_text(b)!r} in the draft")


def _text(token: bytes) -> str:
    return token.decode("utf-8", errors="replace")


class DraftRequest(NamedTuple):
    """One sequence's drafting job; a plain ``(history, pending, n_draft)`` tuple works too.

    ``history`` is exactly what the target's KV holds for the sequence (prompt and reply
    so far, text only); ``pending`` the token sampled last, not yet decoded.
    """

    history: Sequence[int]
    pending: int
    n_draft: int


# (sequence id, first position, tokens, logits on the last row?)
_Feed = tuple[int, int, Sequence[int], bool]


class _DecodeError(Exception):
    def __init__(self, rc: int) -> None:
        super().__init__(f"llama_decode returned {rc}")
        self.rc = rc


class DraftModel:
    """A second model that drafts greedily for every decoding sequence at once.

    Executor thread only: it owns a llama model, a context with the target's sequence
    count and per-sequence size (each sequence has exactly the target's cells, so both run
    out at the same position; a pool as large where the target's conversations share one),
    and one reusable batch. Per
    sequence it remembers exactly which tokens its KV holds, so each call only decodes
    what is new: usually the pending token, sometimes the last accepted draft too.

    A draft that cannot be decoded is never an error for the request: ``propose`` returns
    no drafts and forgets the sequences' KV, and the next call starts them over.
    """

    def __init__(
        self,
        ll: Any,
        model: Any,
        ctx: Any,
        *,
        path: Path,
        n_seq: int,
        n_ctx_seq: int,
        n_batch: int,
        p_min: float = 0.0,
    ) -> None:
        from engine.native.batch import NativeBatch

        self._ll = ll
        self._model = model
        self._ctx = ctx
        self._mem = ll.llama_get_memory(ctx)
        self._vocab = ll.llama_model_get_vocab(model)
        self.path = path
        self.n_seq = n_seq
        self.n_ctx_seq = n_ctx_seq
        self.n_batch = n_batch
        self.n_vocab = int(ll.llama_vocab_n_tokens(self._vocab))
        self.p_min = p_min
        self._batch: NativeBatch = NativeBatch(n_batch, max_outputs=n_seq)
        self._kv: list[list[int]] = [[] for _ in range(n_seq)]
        self.decodes = 0  # llama_decode calls, for stats and tests

    # -- loading ----------------------------------------------------------------

    @classmethod
    def load(
        cls,
        path: Path | str,
        params: LlamaParams,
        *,
        n_gpu_layers: int | None = None,
        target: ModelInfo | None = None,
        progress: Callable[[float], bool] | None = None,
        p_min: float = 0.0,
    ) -> DraftModel:
        """Load the draft GGUF and create its context, as one load phase.

        ``params`` are the target's: the draft gets the same sequence count, per-sequence
        context, batch sizes, KV types and threads (the planner counted its memory that
        way). ``n_gpu_layers`` defaults to ``params.draft_n_gpu_layers``. With ``target``,
        the vocabularies are compared first, before anything native happens.
        ``progress(fraction)`` returning False cancels (``Cancelled``).
        """
        path = Path(path)
        info = inspect_model(path)  # a file that would abort llama.cpp never gets there
        if target is not None:
            check_draft_compatible(target, info, target.path, path)

        from engine.native.backend import require_backend

        require_backend()
        import llama_cpp as ll

        cancelled = False

        def on_progress(fraction: float, _user: Any) -> bool:
            nonlocal cancelled
            if progress is not None and not progress(float(fraction)):
                cancelled = True
            return not cancelled

        mparams = ll.llama_model_default_params()
        mparams.n_gpu_layers = params.draft_n_gpu_layers if n_gpu_layers is None else n_gpu_layers
        # Referenced by this frame until the load returns: llama.cpp calls it only during the load.
        callback = ll.llama_progress_callback(on_progress)
        mparams.progress_callback = callback
        model = ll.llama_model_load_from_file(str(path).encode(), mparams)
        if not model:
            if cancelled:
                raise Cancelled("Loading the draft model was cancelled.")
            raise LoadFailed(f"llama.cpp could not load the draft model {path.name}.")
        ctx = None
        try:
            n_vocab = int(ll.llama_vocab_n_tokens(ll.llama_model_get_vocab(model)))
            if target is not None and target.vocab_size and n_vocab != target.vocab_size:
                raise LoadFailed(
                    f"The draft model {path.name} has {n_vocab} tokens, the model {target.vocab_size}."
                )
            n_seq = max(1, params.n_seq_max)
            # The draft holds what the target holds: its own contexts, or a pool as large.
            unified = params.shared_pool
            n_ctx = params.n_ctx if unified else params.n_ctx_seq * n_seq
            # One logit row per sequence per batch: the draft's own greedy next token.
            own = replace(params, n_outputs_max=n_seq, n_outputs_max_per_seq=1)
            cparams = context_params(ll, own, n_ctx=n_ctx, kv_unified=unified)
            ctx = ll.llama_init_from_model(model, cparams)
            if not ctx:
                raise LoadFailed(f"llama.cpp could not create the draft model's context ({n_ctx} tokens).")
            draft = cls(
                ll,
                model,
                ctx,
                path=path,
                n_seq=int(ll.llama_n_seq_max(ctx)),
                n_ctx_seq=min(cells_per_sequence(int(ll.llama_n_ctx(ctx)), n_seq, unified), params.n_ctx_seq),
                n_batch=min(int(ll.llama_n_batch(ctx)), params.n_batch),
                p_min=p_min,
            )
            draft._warm_up()
        except BaseException:
            if ctx:
                ll.llama_free(ctx)
            ll.llama_model_free(model)
            raise
        if progress is not None and not progress(1.0):
            draft.free()
            raise Cancelled("Loading the draft model was cancelled.")
        return draft

    def _warm_up(self) -> None:
        self.decode_seconds(repeats=1)

    def decode_seconds(self, repeats: int = 3) -> float:
        """The best of ``repeats`` one-token decodes: what one draft token costs here (the
        cache cleared after each, as after the warm-up)."""
        ll = self._ll
        bos = int(ll.llama_vocab_bos(self._vocab))
        best = float("inf")
        for _ in range(repeats):
            self._batch.clear()
            self._batch.add_run(0, 0, [bos if bos >= 0 else 0], range(0, 1))
            start = time.perf_counter()
            rc = int(ll.llama_decode(self._ctx, self._batch.native()))
            ll.llama_synchronize(self._ctx)
            best = min(best, time.perf_counter() - start)
            ll.llama_memory_clear(self._mem, True)
            if rc != 0:
                raise LoadFailed(f"The draft model could not evaluate a token (llama_decode returned {rc}).")
        return best

    # -- state ------------------------------------------------------------------

    def tokens(self, seq: int) -> tuple[int, ...]:
        """What the draft's KV holds for ``seq``, position by position."""
        return tuple(self._kv[seq])

    def cells(self, seq: int) -> int:
        """Positions in the draft KV for ``seq`` according to llama.cpp (pos_max + 1)."""
        return int(self._ll.llama_memory_seq_pos_max(self._mem, seq)) + 1

    def rollback(self, seq: int, keep_tokens: int) -> None:
        """Keep only the first ``keep_tokens`` tokens of ``seq`` (rejected drafts removed)."""
        kv = self._kv[seq]
        if keep_tokens < 0:
            raise ValueError(f"cannot keep {keep_tokens} tokens")
        if keep_tokens < len(kv):
            self._truncate(seq, keep_tokens)

    def release(self, seq: int) -> None:
        """Forget ``seq`` entirely (its target sequence was cleared or is being reset).

        A finished request need not call this: leaving the KV lets the next request on the
        sequence reuse its common prefix, as the target's prefix cache does.
        """
        self._ll.llama_memory_seq_rm(self._mem, seq, -1, -1)
        self._kv[seq].clear()

    def clear(self) -> None:
        """Forget every sequence (the target's context was reset)."""
        self._ll.llama_memory_clear(self._mem, True)
        for kv in self._kv:
            kv.clear()

    def free(self) -> None:
        """Free the native handles; idempotent. The object is unusable afterwards."""
        ll = self._ll
        if self._ctx:
            ll.llama_free(self._ctx)
        if self._model:
            ll.llama_model_free(self._model)
        self._ctx = self._model = self._mem = self._vocab = None

    @property
    def loaded(self) -> bool:
        return bool(self._ctx)

    # -- syncing ----------------------------------------------------------------

    def sync(self, seq: int, tokens: Sequence[int]) -> bool:
        """Make the draft's KV for ``seq`` hold exactly ``tokens``; False if decoding failed."""
        return self.sync_many({seq: tokens})

    def sync_many(self, sequences: Mapping[int, Sequence[int]]) -> bool:
        """``sync`` for several sequences, their missing tokens batched together."""
        feeds: list[_Feed] = []
        for seq in sorted(sequences):
            tokens = sequences[seq]
            if len(tokens) > self.n_ctx_seq:
                raise ValueError(f"{len(tokens)} tokens do not fit a sequence of {self.n_ctx_seq}")
            missing = self._trim_to_prefix(seq, tokens)
            if missing:
                feeds.append((seq, len(tokens) - len(missing), missing, False))
        try:
            self._decode_feeds(feeds)
        except _DecodeError as exc:
            log.warning("draft model: %s while syncing; its sequences start over", exc)
            for seq in sequences:
                self.release(seq)
            return False
        return True

    def _trim_to_prefix(self, seq: int, tokens: Sequence[int]) -> Sequence[int]:
        """Drop the draft KV past its common prefix with ``tokens``; return what is missing."""
        kv = self._kv[seq]
        same = common_token_prefix(kv, tokens)
        if same < len(kv):
            self._truncate(seq, same)
            same = len(kv)  # 0 when the tail could not be removed alone
        return tokens[same:]

    def _truncate(self, seq: int, keep: int) -> None:
        kv = self._kv[seq]
        if self._ll.llama_memory_seq_rm(self._mem, seq, keep, -1):
            del kv[keep:]
        else:
            # Recurrent/hybrid memory cannot drop a tail: start the sequence over.
            self._ll.llama_memory_seq_rm(self._mem, seq, -1, -1)
            kv.clear()

    # -- drafting ---------------------------------------------------------------

    def propose(
        self, requests: Mapping[int, DraftRequest | tuple[Sequence[int], int, int]], min_draft: int = 1
    ) -> dict[int, tuple[int, ...]]:
        """Greedy drafts for every sequence in ``requests``, decoded together.

        First one batch (chunked at ``n_batch``) brings each sequence's KV up to its
        history and decodes its pending token; then one batched decode per draft step
        across the sequences still drafting. A sequence stops at its ``n_draft`` (capped so
        the target's verification rows stay inside the context) or when its greedy
        token's probability falls below ``p_min``. Drafts shorter than ``min_draft`` come
        back empty. Afterwards the KV holds history + pending + all drafts but the last.
        """
        result: dict[int, tuple[int, ...]] = {}
        feeds: list[_Feed] = []
        wanted: dict[int, int] = {}
        for seq in sorted(requests):
            history, pending, n_draft = requests[seq]
            n = min(n_draft, self.n_ctx_seq - len(history) - 1)
            if n < 1:
                result[seq] = ()
                continue
            missing = self._trim_to_prefix(seq, history)
            feeds.append((seq, len(history) - len(missing), [*missing, pending], True))
            wanted[seq] = n
        if not feeds:
            return result
        drafts: dict[int, list[int]] = {seq: [] for seq in wanted}
        try:
            picks = self._decode_feeds(feeds)
            drafting = self._accept_picks(picks, drafts)
            while True:
                drafting = [seq for seq in drafting if len(drafts[seq]) < wanted[seq]]
                if not drafting:
                    break
                step = [(seq, len(self._kv[seq]), (drafts[seq][-1],), True) for seq in drafting]
                drafting = self._accept_picks(self._decode_feeds(step), drafts)
        except _DecodeError as exc:
            log.warning("draft model: %s; no drafts this tick for sequences %s", exc, sorted(wanted))
            for seq in wanted:
                self.release(seq)
                result[seq] = ()
            return result
        for seq, tokens in drafts.items():
            result[seq] = tuple(tokens) if len(tokens) >= min_draft else ()
        return result

    def _accept_picks(
        self, picks: Mapping[int, tuple[int, float]], drafts: dict[int, list[int]]
    ) -> list[int]:
        """Append each greedy pick that clears ``p_min``; the sequences that go on drafting."""
        going: list[int] = []
        for seq, (token, probability) in picks.items():
            if probability < self.p_min:
                continue
            drafts[seq].append(token)
            going.append(seq)
        return going

    def _decode_feeds(self, feeds: Sequence[_Feed]) -> dict[int, tuple[int, float]]:
        """Decode ``(seq, position, tokens, want_logits)`` runs, chunked at ``n_batch``.

        Runs may be split across decodes, never reordered, so each sequence's positions
        stay consecutive. A run that wants logits gets them on its last row, read right
        after that decode (they are only valid until the next one). Returns seq ->
        (greedy token, its probability; 1.0 when ``p_min`` is off).
        """
        batch = self._batch
        capacity = batch.capacity
        picks: dict[int, tuple[int, float]] = {}
        staged: list[tuple[int, Sequence[int]]] = []
        logit_rows: list[tuple[int, int]] = []
        batch.clear()
        for seq, position, tokens, want in feeds:
            if position != len(self._kv[seq]):
                held = len(self._kv[seq])
                raise AssertionError(f"draft sequence {seq} holds {held} tokens, not {position}")
            offset = 0
            while offset < len(tokens):
                if batch.n_tokens == capacity:
                    self._flush(staged, logit_rows, picks)
                take = min(capacity - batch.n_tokens, len(tokens) - offset)
                part = tokens[offset : offset + take]
                last_row = batch.n_tokens + take - 1
                ends = offset + take == len(tokens)
                rows = range(last_row, last_row + 1) if want and ends else range(0)
                batch.add_run(seq, position + offset, part, rows)
                staged.append((seq, part))
                if rows:
                    logit_rows.append((last_row, seq))
                offset += take
        if batch.n_tokens:
            self._flush(staged, logit_rows, picks)
        return picks

    def _flush(
        self,
        staged: list[tuple[int, Sequence[int]]],
        logit_rows: list[tuple[int, int]],
        picks: dict[int, tuple[int, float]],
    ) -> None:
        ll = self._ll
        batch = self._batch
        rc = int(ll.llama_decode(self._ctx, batch.native()))
        self.decodes += 1
        batch.clear()
        if rc != 0:
            staged.clear()
            logit_rows.clear()
            raise _DecodeError(rc)
        for seq, part in staged:
            self._kv[seq].extend(part)
        staged.clear()
        for row, seq in logit_rows:
            picks[seq] = self._greedy(row)
        logit_rows.clear()

    def _greedy(self, row: int) -> tuple[int, float]:
        pointer = self._ll.llama_get_logits_ith(self._ctx, row)
        logits = np.ctypeslib.as_array(pointer, shape=(self.n_vocab,))
        # argmax keeps the first of equal maxima, as llama.cpp's greedy sampler does.
        token = int(logits.argmax())
        if self.p_min <= 0.0:
            return token, 1.0
        top = logits[token]
        return token, float(1.0 / np.exp(logits - top).sum())
