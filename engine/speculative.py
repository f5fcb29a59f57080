"""Speculative decoding: draft sources (prompt lookup, a draft model) and verification.

A draft source guesses the next few tokens of a decoding sequence; the target model then
checks all of them in one decode (``[pending, d1..dk]`` at consecutive positions, logits on
every row, in the same batch as every other sequence's work). Output is unchanged: every
emitted token is still the one the request's own sampler chain picks, so speculation only
changes how many tokens one decode yields.

Two sources:

- ``LookupIndex`` (prompt lookup, pure Python, free): proposes what followed the latest
  earlier occurrence of the sequence's last n-gram. Strong when the reply repeats its
  input (editing, quoting, code). One index per decoding sequence, extended as tokens are
  emitted, so a proposal costs O(max_draft) however long the conversation is.
- ``DraftModel`` (native, executor thread only): a second, smaller GGUF with the same
  vocabulary and its own context holding the same sequence ids as the target's.
  ``check_draft_compatible`` compares the two vocabularies from the GGUF headers before
  anything native is loaded.

How the executor drives it, for one decoding sequence ``seq`` per tick::

    k = draft_limit(config.max_draft, progress.n_past, n_ctx_seq, max_tokens - len(emitted))
    drafts = index.propose(k, config.min_draft)              # or draft_model.propose({...})[seq]
    progress.push(token, drafts)                             # the planner may cut the drafts
    ... decode: rows [pending, d1..dk'] with logits on each (BatchCommit logit_rows) ...
    run = verify_rows(drafts[:k'], lambda i: llama_sampler_sample(chain, ctx, rows[i]))
    for token in run.tokens: emit, stopping at EOG / stop string / max tokens
    pos = progress.discard_rejected(k' - run.accepted)       # target: seq_rm(seq, pos, -1)
    draft_model.rollback(seq, pos); index.extend(run.tokens)
    progress.push(run.tokens[-1], next drafts)               # the correction or bonus token

``verify_rows`` samples row by row and stops at the first mismatch, so a stateful chain
(penalties, a seeded ``dist``) sees exactly the tokens a non-speculative run would.
"""

from __future__ import annotations

import enum
import logging
import re
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from engine import catalog
from engine.catalog import ModelInfo
from engine.errors import Cancelled, EngineError, LoadFailed
from engine.scheduler import common_token_prefix

if TYPE_CHECKING:
    from engine.native_batch import NativeBatch
    from engine.planner import LlamaParams

log = logging.getLogger("hearth.speculative")

MAX_DRAFT_LIMIT = 32  # verification rows are logit rows: more than this costs more than it wins
MAX_NGRAM = 16
CHECKED_LEADING_TOKENS = 256
# gguf.TokenType: UNKNOWN, CONTROL, USER_DEFINED. Their strings are what chat templates and
# stop handling match on, so a draft that disagrees about them would be wrong exactly where
# a turn ends.
SPECIAL_TOKEN_TYPES = frozenset({2, 3, 4})


# --------------------------------------------------------------------------- configuration


class SpeculationMode(enum.Enum):
    OFF = "off"
    PROMPT_LOOKUP = "lookup"
    DRAFT_MODEL = "draft"


class InvalidSpeculation(EngineError, ValueError):
    """Speculation settings that cannot be used; ``message`` says which and why."""


@dataclass(frozen=True)
class SpeculationConfig:
    """Speculation for one load. Each request may still switch it off for itself.

    ``max_draft``: drafts per sequence per tick (each is a verification row in the batch).
    ``min_draft``: shorter proposals are dropped — a one-token guess rarely pays for its
    row. ``ngram_min``/``ngram_max``: n-gram sizes prompt lookup tries, longest first.
    ``p_min``: the draft model stops drafting a sequence when its greedy token's
    probability falls below this (0 = always draft ``max_draft`` tokens).
    """

    mode: SpeculationMode = SpeculationMode.OFF
    draft_path: Path | None = None
    max_draft: int = 16  # an upper bound: the adaptive policy drafts what pays
    min_draft: int = 2
    ngram_min: int = 2  # a single repeated token is weak evidence of copying
    ngram_max: int = 4
    p_min: float = 0.0
    # Draft only as much as pays on this machine (DraftCostModel); False: always draft up
    # to max_draft (tests, and measuring a draft model's acceptance).
    adaptive: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.draft_path, str):
            object.__setattr__(self, "draft_path", Path(self.draft_path))
        if not isinstance(self.mode, SpeculationMode):
            raise InvalidSpeculation(f"Unknown speculation mode {self.mode!r}.")
        if self.mode is SpeculationMode.DRAFT_MODEL and self.draft_path is None:
            raise InvalidSpeculation("Speculation with a draft model needs the draft model's file.")
        if self.mode is not SpeculationMode.DRAFT_MODEL and self.draft_path is not None:
            raise InvalidSpeculation(f"A draft model file was given, but speculation is {self.mode.value}.")
        if not 1 <= self.max_draft <= MAX_DRAFT_LIMIT:
            raise InvalidSpeculation(
                f"Draft length must be between 1 and {MAX_DRAFT_LIMIT} tokens, not {self.max_draft}."
            )
        if not 1 <= self.min_draft <= self.max_draft:
            raise InvalidSpeculation(
                f"Minimum draft length must be between 1 and the maximum ({self.max_draft}), "
                f"not {self.min_draft}."
            )
        if not 1 <= self.ngram_min <= self.ngram_max <= MAX_NGRAM:
            raise InvalidSpeculation(
                f"Lookup n-grams must satisfy 1 <= min <= max <= {MAX_NGRAM}, "
                f"not {self.ngram_min}..{self.ngram_max}."
            )
        if not 0.0 <= self.p_min < 1.0:
            raise InvalidSpeculation(f"Draft probability cut-off must be in [0, 1), not {self.p_min}.")

    @property
    def enabled(self) -> bool:
        return self.mode is not SpeculationMode.OFF

    @classmethod
    def parse(
        cls, spec: str, *, max_draft: int | None = None, min_draft: int | None = None
    ) -> SpeculationConfig:
        """The command line's ``--speculate`` value: ``off``, ``lookup`` or ``draft:PATH``.

        Without an explicit ``min_draft`` it is lowered to ``max_draft`` when that is
        smaller, so ``--draft-max 1`` alone is valid.
        """
        text = spec.strip()
        options: dict[str, Any] = {}
        if max_draft is not None:
            options["max_draft"] = max_draft
            if min_draft is None:
                options["min_draft"] = min(cls.min_draft, max_draft)
        if min_draft is not None:
            options["min_draft"] = min_draft
        lowered = text.lower()
        if lowered in ("", "off", "none"):
            return cls(SpeculationMode.OFF, **options)
        if lowered in ("lookup", "prompt-lookup", "ngram"):
            return cls(SpeculationMode.PROMPT_LOOKUP, **options)
        if lowered.startswith("draft:"):
            path = text[len("draft:") :].strip()
            if not path:
                raise InvalidSpeculation("--speculate draft:PATH needs the draft model's path.")
            return cls(SpeculationMode.DRAFT_MODEL, Path(path).expanduser(), **options)
        raise InvalidSpeculation(f"Unknown speculation {spec!r}: use off, lookup or draft:PATH.")

    def prompt_lookup(self) -> PromptLookup:
        return PromptLookup(self.ngram_min, self.ngram_max)


def draft_limit(max_draft: int, n_past: int, n_ctx_seq: int, tokens_left: int) -> int:
    """How many drafts one sequence may have this tick (0: do not speculate).

    ``n_past`` is the pending token's position: the drafts go at ``n_past + 1 ..``, and
    decode fails once a sequence reaches ``n_ctx_seq``. ``tokens_left`` is what the
    request may still emit; an accepted run emits up to one token more than it drafted.
    """
    return max(0, min(max_draft, n_ctx_seq - n_past - 1, tokens_left - 1))


# --------------------------------------------------------------------------- prompt lookup


@dataclass(frozen=True, slots=True)
class PromptLookup:
    """N-gram lookup settings; ``propose`` is the O(history) reference, ``index`` the fast form."""

    ngram_min: int = 1
    ngram_max: int = 4

    def __post_init__(self) -> None:
        if not 1 <= self.ngram_min <= self.ngram_max <= MAX_NGRAM:
            raise ValueError(f"n-gram sizes must satisfy 1 <= min <= max <= {MAX_NGRAM}")

    def index(self, tokens: Iterable[int] = ()) -> LookupIndex:
        return LookupIndex(self.ngram_min, self.ngram_max, tokens)

    def propose(self, history: Sequence[int], max_draft: int, min_draft: int = 1) -> tuple[int, ...]:
        """The continuation of the latest earlier match of the history's last n-gram.

        Tries n from ``ngram_max`` down to ``ngram_min``; the first n whose last n tokens
        occur earlier (followed by at least one token) decides. Its most recent earlier
        occurrence gives up to ``max_draft`` following tokens; fewer than ``min_draft``
        gives ``()``. A shorter n would not help then: its latest match is at least as
        recent, so its continuation is no longer.
        """
        tokens = list(history)
        length = len(tokens)
        for n in range(self.ngram_max, self.ngram_min - 1, -1):
            if length < n + 1:
                continue
            suffix = tokens[length - n :]
            # Latest start first; the match must leave a token after it inside the history.
            for start in range(length - n - 1, -1, -1):
                if tokens[start : start + n] == suffix:
                    continuation = tokens[start + n : start + n + max_draft]
                    return tuple(continuation) if len(continuation) >= min_draft else ()
        return ()


class LookupIndex:
    """Prompt lookup for one sequence, kept incrementally.

    For each n it maps an n-gram to where the token after its latest occurrence is, but
    only for occurrences already followed by a token. The history's own suffix is
    therefore never its own match, and a lookup is one dict probe per n plus a slice:
    O(max_draft) per tick instead of a scan of the whole conversation.

    Append-only: extend it with the prompt, then with each emitted token (the pending
    token included — proposals continue after it). Drafts are never added, so rejected
    drafts need no rollback.
    """

    __slots__ = ("_tables", "_tokens", "ngram_max", "ngram_min")

    def __init__(self, ngram_min: int = 1, ngram_max: int = 4, tokens: Iterable[int] = ()) -> None:
        if not 1 <= ngram_min <= ngram_max <= MAX_NGRAM:
            raise ValueError(f"n-gram sizes must satisfy 1 <= min <= max <= {MAX_NGRAM}")
        self.ngram_min = ngram_min
        self.ngram_max = ngram_max
        self._tokens: list[int] = []
        # _tables[n - ngram_min]: n-gram -> index of the token that followed its latest occurrence
        self._tables: tuple[dict[tuple[int, ...], int], ...] = tuple(
            {} for _ in range(ngram_min, ngram_max + 1)
        )
        self.extend(tokens)

    def __len__(self) -> int:
        return len(self._tokens)

    @property
    def tokens(self) -> tuple[int, ...]:
        """A copy of the indexed history (O(n): for tests and diagnostics)."""
        return tuple(self._tokens)

    def extend(self, tokens: Iterable[int]) -> None:
        history = self._tokens
        pairs = tuple(zip(range(self.ngram_min, self.ngram_max + 1), self._tables, strict=True))
        for token in tokens:
            # The n-grams ending just before ``token`` now have a continuation: ``token``.
            follow = len(history)
            history.append(int(token))
            for n, table in pairs:
                if follow < n:
                    break
                table[tuple(history[follow - n : follow])] = follow

    def propose(self, max_draft: int, min_draft: int = 1) -> tuple[int, ...]:
        """Same answer as ``PromptLookup.propose`` over the indexed history."""
        history = self._tokens
        length = len(history)
        for n in range(self.ngram_max, self.ngram_min - 1, -1):
            if length < n + 1:
                continue
            start = self._tables[n - self.ngram_min].get(tuple(history[length - n :]))
            if start is None:
                continue
            continuation = history[start : start + max_draft]
            return tuple(continuation) if len(continuation) >= min_draft else ()
        return ()


# --------------------------------------------------------------------------- verification


class AcceptedRun(NamedTuple):
    """The outcome of verifying one sequence's drafts.

    ``accepted`` drafts matched; ``tokens`` are what to emit, in order: the accepted
    drafts then the target's own token after them (the correction at the first mismatch,
    or the bonus token when every draft matched). ``tokens[-1]`` is the next pending token.
    """

    accepted: int
    tokens: tuple[int, ...]

    def rejected(self, n_drafts: int) -> int:
        """Decoded rows to remove from KV (target and draft): ``discard_rejected``'s count."""
        return n_drafts - self.accepted


def accept_run(draft: Sequence[int], sampled: Sequence[int]) -> AcceptedRun:
    """Accept drafts up to the first mismatch, plus the corrected or bonus token.

    ``sampled[i]`` is the token the target's sampler chose at verified row ``i`` (row 0
    follows the pending token, row i follows ``draft[i - 1]``). Entries after the first
    mismatch are ignored; too few to decide raises ``ValueError``.
    """
    for i, guess in enumerate(draft):
        if i >= len(sampled):
            raise ValueError(f"{len(sampled)} sampled tokens cannot verify {len(draft)} drafts")
        if sampled[i] != guess:
            return AcceptedRun(i, tuple(sampled[: i + 1]))
    k = len(draft)
    if len(sampled) <= k:
        raise ValueError(f"every draft matched: the bonus token (row {k}) is missing")
    return AcceptedRun(k, tuple(sampled[: k + 1]))


def verify_rows(draft: Sequence[int], sample_row: Callable[[int], int]) -> AcceptedRun:
    """Sample rows 0, 1, ... in order until the first mismatch (at most ``len(draft) + 1``).

    ``sample_row(i)`` samples the target's verification row ``i`` with the request's chain
    (``llama_sampler_sample`` also accepts the token into the chain). Rows after a
    mismatch are never sampled: their logits follow a rejected token.
    """
    sampled: list[int] = []
    for i, guess in enumerate(draft):
        token = sample_row(i)
        sampled.append(token)
        if token != guess:
            return AcceptedRun(i, tuple(sampled))
    sampled.append(sample_row(len(draft)))
    return AcceptedRun(len(draft), tuple(sampled))


# --------------------------------------------------------------------------- vocabulary check


class IncompatibleDraft(EngineError):
    """A draft model whose vocabulary does not match the model it should draft for."""

    def __init__(self, draft_name: str, target_name: str, reason: str) -> None:
        self.reason = reason
        super().__init__(f"{draft_name} cannot draft for {target_name}: {reason}.")


_TOKENS_KEY = "tokenizer.ggml.tokens"
_TOKEN_TYPE_KEY = "tokenizer.ggml.token_type"
_SPECIAL_ID_KEY = re.compile(r"^tokenizer\.ggml\.(\w+)_token_id$")
_U64 = struct.Struct("<Q")
_INT_TYPES = frozenset(
    {
        catalog.VT.UINT8,
        catalog.VT.INT8,
        catalog.VT.UINT16,
        catalog.VT.INT16,
        catalog.VT.UINT32,
        catalog.VT.INT32,
        catalog.VT.UINT64,
        catalog.VT.INT64,
    }
)


class TokenTable:
    """A GGUF's token strings as stored (length-prefixed, back to back), plus token types.

    Two files with byte-identical tables are compatible at once (one comparison); only
    when they differ are token offsets walked, and only as far as a lookup needs.
    """

    __slots__ = ("_blob", "_offsets", "count", "path", "special_ids", "token_types")

    def __init__(
        self,
        path: Path,
        count: int,
        blob: bytes,
        token_types: np.ndarray | None,
        special_ids: Mapping[str, int],
    ) -> None:
        self.path = path
        self.count = count
        self._blob = blob
        self.token_types = token_types
        self.special_ids = dict(special_ids)
        self._offsets = [0]  # _offsets[i]: where token i's length field starts

    def same_strings(self, other: TokenTable) -> bool:
        return self.count == other.count and self._blob == other._blob

    def token(self, i: int) -> bytes:
        if not 0 <= i < self.count:
            raise IndexError(f"token {i} outside a vocabulary of {self.count}")
        offsets = self._offsets
        blob = self._blob
        while len(offsets) <= i + 1:
            at = offsets[-1]
            if at + 8 > len(blob):
                raise catalog._invalid(self.path, "corrupt vocabulary: a token runs past the token list")
            end = at + 8 + _U64.unpack_from(blob, at)[0]
            if end > len(blob):
                raise catalog._invalid(self.path, "corrupt vocabulary: a token runs past the token list")
            offsets.append(end)
        return blob[offsets[i] + 8 : offsets[i + 1]]

    def special_tokens(self) -> frozenset[int]:
        """Ids named by ``tokenizer.ggml.*_token_id`` and ids typed unknown/control/user-defined."""
        ids = {i for i in self.special_ids.values() if 0 <= i < self.count}
        if self.token_types is not None:
            mask = np.isin(self.token_types, list(SPECIAL_TOKEN_TYPES))
            ids.update(int(i) for i in np.flatnonzero(mask) if i < self.count)
        return frozenset(ids)


def read_token_table(path: Path | str) -> TokenTable:
    """The vocabulary of a GGUF from its header only (never the tensor data).

    Reuses the catalog's bounded reader, so a damaged header ends in ``InvalidModelFile``
    rather than an unbounded allocation. ``gguf.GGUFReader`` is not used: it maps the file
    and builds an object per token, seconds for a 262k vocabulary.
    """
    path = Path(path)
    vt = catalog.VT
    fh, size = catalog._open(path)
    with fh:
        reader = catalog._Reader(path, fh, size)
        if size < 24:
            raise reader.fail("truncated: the file ends inside its header")
        at = reader.ensure(4, "magic")
        if reader.buf[at : at + 4] != catalog._MAGIC:
            raise reader.fail("not a GGUF file")
        reader.skip(4)
        version = reader.u32("version")
        if version not in (2, 3):
            raise reader.fail(f"unsupported GGUF version {version}")
        reader.u64("tensor count")
        kv_count = reader.u64("key-value count")
        if kv_count * 13 > reader.remaining:
            raise reader.fail(reader.overrun(f"a count of {kv_count:,} key-value pairs", kv_count * 13))
        span: tuple[int, int, int] | None = None
        types: np.ndarray | None = None
        special: dict[str, int] = {}
        for _ in range(kv_count):
            key = reader.string("metadata key")
            vtype = reader.u32(f"type of '{key}'")
            if vtype == vt.ARRAY:
                item = reader.u32(f"item type of '{key}'")
                count = reader.u64(f"length of '{key}'")
                if item == vt.STRING:
                    if count * 8 > reader.remaining:
                        raise reader.fail(reader.overrun(f"array '{key}' of {count:,} strings", count * 8))
                    start = reader.pos
                    catalog._scan_string_array(reader, key, count, check_duplicates=False)
                    if key == _TOKENS_KEY:
                        span = (start, reader.pos, count)
                elif item in catalog._SCALAR_FORMATS:
                    n_bytes = count * catalog._SCALAR_FORMATS[item].size
                    if n_bytes > reader.remaining:
                        raise reader.fail(reader.overrun(f"array '{key}' of {count:,} items", n_bytes))
                    if key == _TOKEN_TYPE_KEY and item in _INT_TYPES:
                        at = reader.ensure(n_bytes, f"items of '{key}'")
                        raw = np.frombuffer(
                            reader.buf, dtype=catalog._NUMPY_TYPES[item], count=count, offset=at
                        )
                        types = raw.astype(np.int64)
                    reader.skip(n_bytes)
                else:
                    raise reader.fail(f"corrupt metadata: array '{key}' has unsupported item type {item}")
            elif vtype == vt.STRING:
                reader.raw_string(f"value of '{key}'")
            elif vtype in catalog._SCALAR_FORMATS:
                value = reader.scalar(vtype, f"value of '{key}'")
                match = _SPECIAL_ID_KEY.match(key)
                if match and vtype in _INT_TYPES:
                    special[match.group(1)] = int(value)
            else:
                raise reader.fail(f"corrupt metadata: key '{key}' has unknown type {vtype}")
        if span is None:
            raise reader.fail("this model has no vocabulary (tokenizer.ggml.tokens)")
        start, end, count = span
        try:
            fh.seek(start)
            blob = catalog._read_fully(fh, end - start)
        except OSError as exc:
            raise reader.fail(f"cannot read the file: {exc.strerror or exc}") from exc
        if len(blob) != end - start:
            raise reader.fail("truncated: the file got shorter while it was being read")
    return TokenTable(path, count, blob, types, special)


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


# --------------------------------------------------------------------------- draft model


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
    count and per-sequence size (``kv_unified`` off: each sequence has exactly the
    target's cells, so both run out at the same position), and one reusable batch. Per
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
        from engine.native_batch import NativeBatch

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
        self._batch: NativeBatch = NativeBatch(n_batch)
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
        info = catalog.inspect_model(path)  # a file that would abort llama.cpp never gets there
        if target is not None:
            check_draft_compatible(target, info, target.path, path)

        from engine.native import require_backend

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
            n_ctx_seq = params.n_ctx if params.kv_unified else params.n_ctx_seq
            cparams = ll.llama_context_default_params()
            cparams.n_ctx = n_ctx_seq * n_seq
            cparams.n_batch = params.n_batch
            cparams.n_ubatch = params.n_ubatch
            cparams.n_seq_max = n_seq
            cparams.n_threads = params.n_threads
            cparams.n_threads_batch = params.n_threads_batch
            cparams.type_k = params.type_k.ggml_type
            cparams.type_v = params.type_v.ggml_type
            cparams.flash_attn_type = params.flash_attn_type
            cparams.swa_full = params.swa_full
            cparams.kv_unified = False
            cparams.no_perf = True
            ctx = ll.llama_init_from_model(model, cparams)
            if not ctx:
                raise LoadFailed(
                    f"llama.cpp could not create the draft model's context ({n_ctx_seq * n_seq} tokens)."
                )
            draft = cls(
                ll,
                model,
                ctx,
                path=path,
                n_seq=int(ll.llama_n_seq_max(ctx)),
                n_ctx_seq=int(ll.llama_n_ctx(ctx)) // n_seq,
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
        ll = self._ll
        bos = int(ll.llama_vocab_bos(self._vocab))
        batch = self._batch
        batch.clear()
        batch.add_run(0, 0, [bos if bos >= 0 else 0], range(0, 1))
        rc = int(ll.llama_decode(self._ctx, batch.native()))
        ll.llama_memory_clear(self._mem, True)
        if rc != 0:
            raise LoadFailed(f"The draft model could not evaluate a token (llama_decode returned {rc}).")

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


__all__ = [
    "CHECKED_LEADING_TOKENS",
    "MAX_DRAFT_LIMIT",
    "AcceptedRun",
    "DraftModel",
    "DraftRequest",
    "IncompatibleDraft",
    "InvalidSpeculation",
    "LookupIndex",
    "PromptLookup",
    "SpeculationConfig",
    "SpeculationMode",
    "TokenTable",
    "accept_run",
    "check_draft_compatible",
    "draft_limit",
    "read_token_table",
    "verify_rows",
]


# --------------------------------------------------------------------------- how many drafts


ACCEPTANCE_PRIOR = 0.9  # optimistic: a request starts drafting and backs off on misses
ACCEPTANCE_WEIGHT = 0.3


def update_acceptance(p: float, drafted: int, accepted: int, weight: float = ACCEPTANCE_WEIGHT) -> float:
    """An exponential average of the chance that the next draft token is accepted.

    Verification is a run of Bernoulli trials that stops at the first failure: the first
    ``accepted`` drafts succeeded and, if ``accepted < drafted``, the next one failed.
    """
    for _ in range(accepted):
        p += weight * (1.0 - p)
    if accepted < drafted:
        p -= weight * p
    return min(max(p, 0.0), 1.0)


def relax_acceptance(p: float, weight: float = ACCEPTANCE_WEIGHT / 16) -> float:
    """A tick without drafting drifts the estimate back toward the prior, so a request
    that stopped speculating (the text stopped repeating) tries again later."""
    return p + weight * (ACCEPTANCE_PRIOR - p)


def next_draft_cap(cap: int, drafted: int, accepted: int, max_draft: int) -> int:
    """Slow start, as TCP does: a fully accepted run doubles how many drafts the next
    verification may have; a miss shrinks it to what was accepted. A request whose text
    stopped repeating then loses little on its next wrong guess."""
    if drafted and accepted == drafted:
        return min(max_draft, max(cap, drafted) * 2)
    return max(1, min(cap, accepted + 1))


@dataclass(frozen=True)
class DraftCostModel:
    """Chooses a draft length that maximises expected tokens per unit of decode cost.

    ``row_costs[n]`` is the cost of verifying ``n`` drafts (a decode with ``n + 1`` rows
    for the sequence), relative to a plain one-row decode (``row_costs[0] == 1``); on a
    CPU the logits of every extra row cost nearly as much as the first, so drafting only
    pays when most drafts are accepted. ``draft_cost`` is the cost of producing one draft
    token (0 for prompt lookup; a draft model's decode relative to the target's).
    """

    row_costs: tuple[float, ...]
    draft_cost: float = 0.0

    def __post_init__(self) -> None:
        if not self.row_costs or self.row_costs[0] <= 0:
            raise ValueError("row_costs[0] is the cost of a plain decode and must be positive")

    @classmethod
    def measured(
        cls, seconds: Mapping[int, float], max_draft: int, draft_cost: float = 0.0
    ) -> DraftCostModel:
        """From decode timings of a few row counts (``{rows: seconds}``), interpolated."""
        points = sorted(seconds.items())
        base = seconds.get(1) or points[0][1]
        costs = []
        for n in range(max_draft + 1):
            rows = n + 1
            below = max((p for p in points if p[0] <= rows), default=points[0])
            above = min((p for p in points if p[0] >= rows), default=points[-1])
            if above[0] == below[0]:
                value = below[1] if rows <= below[0] else below[1] * rows / below[0]
            else:
                t = (rows - below[0]) / (above[0] - below[0])
                value = below[1] + t * (above[1] - below[1])
            costs.append(max(value / base, 1.0))
        return cls(tuple(costs), draft_cost)

    def expected_tokens(self, p: float, n: int) -> float:
        """Tokens one verification emits with ``n`` drafts: 1 + p + p^2 + ... + p^n."""
        return float(n + 1) if p >= 1.0 else (1.0 - p ** (n + 1)) / (1.0 - p)

    def choose(self, p: float, limit: int, min_draft: int = 1) -> int:
        """The number of drafts to propose (0: decode plainly this tick)."""
        plain = 1.0 / self.row_costs[0]
        best_n, best_rate = 0, plain
        for n in range(max(1, min_draft), min(limit, len(self.row_costs) - 1) + 1):
            rate = self.expected_tokens(p, n) / (self.row_costs[n] + n * self.draft_cost)
            if rate > best_rate:
                best_n, best_rate = n, rate
        # Only a clear gain: speculation must never make a reply slower.
        return best_n if best_rate > plain * 1.05 else 0
