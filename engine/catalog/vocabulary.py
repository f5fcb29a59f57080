"""A GGUF's vocabulary as stored: scanning its token strings, and the token table.

- ``scan_string_array`` walks a length-prefixed string array (vectorised for big
  vocabularies) for its digest (``ModelInfo.vocab_hash``), its "<0xXX>" byte tokens, and,
  for the token list, the duplicates llama.cpp would abort on (tokens compared as C
  strings, cut at a NUL, as llama.cpp reads them).
- ``read_token_table(path) -> TokenTable``: the token strings and types of a GGUF, for
  comparing two models' vocabularies (a draft model's with its target's) without loading
  either.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

from engine.catalog.gguf_reader import (
    INT_TYPES,
    MAX_HEADER_BYTES,
    NUMPY_TYPES,
    SCALAR_FORMATS,
    SHRANK,
    U64,
    VT,
    Reader,
    invalid_file,
    open_reader,
    read_fully,
    read_preamble,
    shorten,
)

TOKENS_KEY = "tokenizer.ggml.tokens"
MERGES_KEY = "tokenizer.ggml.merges"
SCORES_KEY = "tokenizer.ggml.scores"
TOKEN_TYPE_KEY = "tokenizer.ggml.token_type"

# gguf.TokenType: UNKNOWN, CONTROL, USER_DEFINED. Their strings are what chat templates and
# stop handling match on, so two vocabularies that disagree about them differ where a turn ends.
SPECIAL_TOKEN_TYPES = frozenset({2, 3, 4})

_SPECIAL_ID_KEY = re.compile(r"^tokenizer\.ggml\.(\w+)_token_id$")

# --------------------------------------------------------------------------- string arrays

_H1 = np.uint64(0x9E3779B97F4A7C15)
_H2 = np.uint64(0xC2B2AE3D27D4EB4F)
_H3 = np.uint64(0x165667B19E3779F9)


def items_digest(items: Iterable[bytes]) -> str:
    """The vocabulary's identity: a hash of its items as stored (length field, then text)."""
    h = hashlib.sha1(usedforsecurity=False)
    for item in items:
        h.update(len(item).to_bytes(8, "little"))
        h.update(item)
    return h.hexdigest()


_BYTE_TOKEN = re.compile(rb"<0x[0-9A-F]{2}>")


def count_byte_tokens(items: Iterable[bytes]) -> int:
    """How many of the 256 "<0xXX>" byte tokens an SPM vocabulary has (6-byte items only)."""
    return len({item for item in items if len(item) == 6 and _BYTE_TOKEN.fullmatch(item)})


def scan_string_array(reader: Reader, key: str, count: int, *, check_duplicates: bool) -> tuple[str, int]:
    """Walk ``count`` length-prefixed strings at ``reader.pos`` (and check duplicates);
    the digest of the raw array (``items_digest`` of its items) and its byte-token count.

    A Python loop over a 262k-token vocabulary costs ~100 ms, so the common case is
    vectorised: every string starts with a u64 length whose high bytes are zero, followed
    by text that does not start with NUL, so string starts are "a run of >= 4 zero bytes
    then a non-zero byte, minus 8". Those candidates are then *verified* as an exact
    chain (start[k+1] == start[k] + 8 + length[k]); when the guess does not hold (NUL
    bytes in the text, empty strings side by side, absurd lengths) the exact slow path
    runs instead, so the speed-up never changes the result.
    """
    # ~17 bytes per entry is typical of vocabularies (8-byte length + short text); a
    # window that turns out too small grows from what the first pass has seen.
    estimate = min(count * 18 + 65536, reader.remaining, MAX_HEADER_BYTES - reader.pos)
    for _ in range(8):
        reader.ensure(min(max(estimate, 8), reader.remaining), f"'{key}'")
        outcome = _fast_string_chain(reader, count)
        if outcome is None:
            break
        if isinstance(outcome, int):  # the window ends before the array does
            if outcome <= estimate or estimate >= reader.remaining:
                break
            estimate = outcome
            continue
        starts, lengths, end = outcome
        if check_duplicates:
            _check_duplicates_vectorised(reader, starts, lengths)
        lo = reader.pos - reader.base
        digest = hashlib.sha1(reader.buf[lo : lo + end], usedforsecurity=False).hexdigest()
        six = (lo + starts[lengths == 6] + 8).tolist()
        byte_tokens = count_byte_tokens(bytes(reader.buf[a : a + 6]) for a in six)
        reader.pos += end
        return digest, byte_tokens
    return _scan_string_array_slowly(reader, key, count, check_duplicates=check_duplicates)


def _fast_string_chain(reader: Reader, count: int) -> tuple[np.ndarray, np.ndarray, int] | int | None:
    """Starts and lengths (relative to ``reader.pos``) and the end offset of the array;
    an int when the window must grow to about that size; None when the guess fails."""
    lo = reader.pos - reader.base
    buf = reader.buf
    size = len(buf) - lo
    if size < 24:
        return None
    # Aligned u16 words cover any run of >= 3 zero bytes with at least one all-zero word,
    # which makes this ~4x cheaper than testing every byte offset.
    first_word = lo // 2
    n_words = (len(buf) // 2) - first_word
    words = np.frombuffer(buf, dtype="<u2", count=n_words, offset=first_word * 2)
    zero = words == 0
    # Words j and j+1 zero (>= 4 zero bytes), word j+2 not: the non-zero byte that ends
    # the run is the first text byte of the string whose length field ends just before.
    pair = zero[:-1] & zero[1:]
    j = np.flatnonzero(pair[:-1] > zero[2:])  # bool ">" is "and not", in one pass
    text_at = (j + 2) * 2 + ((words[j + 2] & 0xFF) == 0) + first_word * 2 - lo
    starts = text_at - 8
    starts = starts[starts >= 0]
    k = min(len(starts), count)
    if k == 0 or starts[0] != 0:
        return None
    starts = starts[:k]
    u64 = _u64_at_every_byte(buf, lo, size)
    raw_lengths = u64[starts]
    lengths = np.minimum(raw_lengths, size).astype(np.int64)
    ends = starts + 8 + lengths
    chained = ends[:-1] == starts[1:]
    m = k if bool(chained.all()) else int(np.argmin(chained)) + 1
    if m == count and int(ends[m - 1]) <= size:
        return starts, lengths, int(ends[m - 1])
    reached = int(ends[m - 1])
    if reached < size - 32:
        return None  # broken inside the window: not the shape we guessed
    # Ran out of window: ask for room for the rest at the average size so far.
    return int(reached + (count - m) * (reached / m) * 1.1) + 4096


def _u64_at_every_byte(buf: bytes | bytearray | memoryview, lo: int, size: int) -> np.ndarray:
    """A view of ``buf[lo : lo + size]`` whose item i is the little-endian u64 at byte i."""
    return np.ndarray((size - 7,), dtype="<u8", buffer=buf, offset=lo, strides=(1,))


def _check_duplicates_vectorised(reader: Reader, starts: np.ndarray, lengths: np.ndarray) -> None:
    lo = reader.pos - reader.base
    buf = reader.buf
    size = len(buf) - lo
    if _texts_hold_nul(buf, lo, starts, lengths):
        # llama.cpp reads tokens as C strings: compare them as it will, cut at the NUL.
        tokens = [
            bytes(buf[lo + int(a) + 8 : lo + int(a) + 8 + int(n)])
            for a, n in zip(starts, lengths, strict=True)
        ]
        check_duplicate_tokens(reader, tokens)
        return
    u64 = _u64_at_every_byte(buf, lo, size)
    # Sample the last, first and middle 8 bytes of each string. For strings shorter than
    # 8 the samples overlap the string's own length field, which is a function of the
    # length, so equal strings always give equal samples: no duplicate is ever missed.
    # Unequal strings that collide are told apart exactly below.
    last = u64[np.minimum(starts + lengths, size - 8)]
    first = u64[starts + np.minimum(lengths, 8)]
    middle = u64[starts + np.minimum(lengths // 2 + 4, lengths)]
    h = last * _H1
    h ^= first * _H2
    h ^= middle * _H3
    h += lengths.astype(np.uint64)
    folded = ((h >> np.uint64(32)) ^ h).astype(np.uint32)
    empty = lengths == 0
    if empty.any():
        # llama.cpp renames empty tokens to "[EMPTY_<id>]", so they never collide with
        # each other; take them out of the hash test and check the names exactly.
        folded[empty] = 0
    live = folded[~empty] if empty.any() else folded
    # Only hashes sharing one of 2^20 buckets can be equal; sorting just those is ~3x
    # cheaper than sorting all 262k.
    bucket = (live >> np.uint32(12)).astype(np.intp)
    crowded = np.bincount(bucket, minlength=1 << 20)[bucket] > 1
    ordered = np.sort(live[crowded])
    same = ordered[1:] == ordered[:-1]
    if not same.any() and not empty.any():
        return
    suspects = np.flatnonzero(np.isin(folded, ordered[1:][same]) & ~empty)
    seen: dict[bytes, int] = {}
    for i in suspects.tolist():
        a = lo + int(starts[i]) + 8
        token = buf[a : a + int(lengths[i])]
        if token in seen:
            raise reader.fail(f"duplicate vocabulary entry {_quote_token(token)}")
        seen[token] = i
    if empty.any():
        names = {f"[EMPTY_{i}]".encode() for i in np.flatnonzero(empty).tolist()}
        sizes = {len(n) for n in names}
        for i in np.flatnonzero(np.isin(lengths, list(sizes))).tolist():
            a = lo + int(starts[i]) + 8
            token = buf[a : a + int(lengths[i])]
            if token in names:
                raise reader.fail(f"duplicate vocabulary entry {_quote_token(token)}")


def _scan_string_array_slowly(
    reader: Reader, key: str, count: int, *, check_duplicates: bool
) -> tuple[str, int]:
    items = [reader.raw_string(f"item of '{key}'") for _ in range(count)]
    if check_duplicates:
        check_duplicate_tokens(reader, items)
    return items_digest(items), count_byte_tokens(items)


def _texts_hold_nul(
    buf: bytes | bytearray | memoryview, lo: int, starts: np.ndarray, lengths: np.ndarray
) -> bool:
    """Whether any string's text has a NUL byte: all zero bytes of the array, less those of
    the 8-byte length fields (known from the lengths), without locating any of them."""
    end = lo + int(starts[-1]) + 8 + int(lengths[-1])
    region = np.frombuffer(buf, dtype=np.uint8, count=end - lo, offset=lo)
    in_lengths = np.count_nonzero(lengths.astype("<u8").view(np.uint8) == 0)
    return int(np.count_nonzero(region == 0)) > int(in_lengths)


def check_duplicate_tokens(reader: Reader, tokens: list[bytes]) -> None:
    seen: dict[bytes, int] = {}
    for i, token in enumerate(tokens):
        # llama.cpp keeps what comes before a NUL (C strings) and renames empty tokens
        word = token.split(b"\0", 1)[0] or f"[EMPTY_{i}]".encode()
        if word in seen:
            j = seen[word]
            if b"\0" in token or b"\0" in tokens[j]:
                raise reader.fail(
                    f"vocabulary entries {j} and {i} are the same token {_quote_token(word)} "
                    "once cut at a NUL byte, as llama.cpp reads them"
                )
            raise reader.fail(f"duplicate vocabulary entry {_quote_token(word)}")
        seen[word] = i


def _quote_token(token: bytes) -> str:
    text = token.decode("utf-8", errors="replace")
    if not text.isprintable():
        text = text.encode("unicode_escape").decode("ascii")
    return f"'{shorten(text, 40)}'"


# --------------------------------------------------------------------------- token tables


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
                raise invalid_file(self.path, "corrupt vocabulary: a token runs past the token list")
            end = at + 8 + U64.unpack_from(blob, at)[0]
            if end > len(blob):
                raise invalid_file(self.path, "corrupt vocabulary: a token runs past the token list")
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
    with open_reader(path) as reader:
        _, _, kv_count = read_preamble(reader)
        span: tuple[int, int, int] | None = None
        types: np.ndarray | None = None
        special: dict[str, int] = {}
        for _ in range(kv_count):
            key = reader.string("metadata key")
            vtype = reader.u32(f"type of '{key}'")
            if vtype == VT.ARRAY:
                item = reader.u32(f"item type of '{key}'")
                count = reader.u64(f"length of '{key}'")
                if item == VT.STRING:
                    if count * 8 > reader.remaining:
                        raise reader.fail(reader.overrun(f"array '{key}' of {count:,} strings", count * 8))
                    start = reader.pos
                    scan_string_array(reader, key, count, check_duplicates=False)
                    if key == TOKENS_KEY:
                        span = (start, reader.pos, count)
                elif item in SCALAR_FORMATS:
                    n_bytes = count * SCALAR_FORMATS[item].size
                    if n_bytes > reader.remaining:
                        raise reader.fail(reader.overrun(f"array '{key}' of {count:,} items", n_bytes))
                    if key == TOKEN_TYPE_KEY and item in INT_TYPES:
                        at = reader.ensure(n_bytes, f"items of '{key}'")
                        raw = np.frombuffer(reader.buf, dtype=NUMPY_TYPES[item], count=count, offset=at)
                        types = raw.astype(np.int64)
                    reader.skip(n_bytes)
                else:
                    raise reader.fail(f"corrupt metadata: array '{key}' has unsupported item type {item}")
            elif vtype == VT.STRING:
                reader.raw_string(f"value of '{key}'")
            elif vtype in SCALAR_FORMATS:
                value = reader.scalar(vtype, f"value of '{key}'")
                match = _SPECIAL_ID_KEY.match(key)
                if match and vtype in INT_TYPES:
                    special[match.group(1)] = int(value)
            else:
                raise reader.fail(f"corrupt metadata: key '{key}' has unknown type {vtype}")
        if span is None:
            raise reader.fail("this model has no vocabulary (tokenizer.ggml.tokens)")
        start, end, count = span
        try:
            reader.fh.seek(start)
            blob = read_fully(reader.fh, end - start)
        except OSError as exc:
            raise reader.fail(f"cannot read the file: {exc.strerror or exc}") from exc
        if len(blob) != end - start:
            raise reader.fail(SHRANK)
    return TokenTable(path, count, blob, types, special)
