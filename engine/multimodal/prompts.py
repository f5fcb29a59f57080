"""Tokenized image prompts: the image chunks a prompt refers to, the reference-counted
cache of their native copies, and whether a prompt's images fit a conversation's context.

Pure Python: the native chunk pointers are opaque integers here, freed through the
callback the projector runtime gives the cache.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from engine.base.errors import ImageRejected
from engine.scheduler import MediaSegment, PromptLayout


def check_fits(layout: PromptLayout, n_ctx_seq: int, *, reserve: int = 1) -> int:
    """Refuse a prompt whose images do not fit the conversation's context.

    ``n_ctx_seq`` is the context one conversation may use (cells of its KV stream);
    ``reserve`` keeps room to generate at least that many tokens. Returns how many
    tokens are left after the prompt.
    """
    left = n_ctx_seq - reserve - layout.logical_tokens
    if left >= 0:
        return left
    media = [s for s in layout.segments if isinstance(s, MediaSegment)]
    if not media:
        return left  # too long, but not because of images: the caller's usual check says so
    image_tokens = sum(s.logical_tokens for s in media)
    room = max(0, n_ctx_seq - reserve - (layout.logical_tokens - image_tokens))
    what = "The image needs" if len(media) == 1 else f"The {len(media)} images need"
    raise ImageRejected(f"{what} {image_tokens} tokens; the conversation has {room} left.")


@dataclass(frozen=True, slots=True)
class MediaChunk:
    """What the executor needs to schedule one image chunk; the native copy stays in the runtime."""

    identity: str
    logical_tokens: int
    native_positions: int
    non_causal: bool  # must be decoded in one micro-batch (attention within the image is bidirectional)


@dataclass(frozen=True, slots=True)
class TokenizedPrompt:
    """A prompt as a ``PromptLayout`` plus the image chunks its media segments refer to.

    Each identity in ``media`` holds one reference in the runtime's chunk cache until
    ``ProjectorRuntime.release_prompt`` (or ``release`` per identity).
    """

    layout: PromptLayout
    media: Mapping[str, MediaChunk]

    @property
    def image_count(self) -> int:
        return self.layout.media_count

    @property
    def image_tokens(self) -> int:
        return sum(s.logical_tokens for s in self.layout.segments if isinstance(s, MediaSegment))


@dataclass
class _CacheEntry:
    pointer: int
    chunk: MediaChunk
    refs: int


class ChunkCache:
    """Native image chunk copies by identity, freed when the last holder releases them.

    A follow-up turn about the same picture tokenizes it again; keeping one copy per
    identity means its preprocessed pixels exist once however many requests hold it.
    """

    def __init__(self, free: Callable[[int], None]) -> None:
        self._free = free
        self._entries: dict[str, _CacheEntry] = {}

    def __contains__(self, identity: object) -> bool:
        return identity in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def acquire_existing(self, identity: str) -> MediaChunk | None:
        entry = self._entries.get(identity)
        if entry is None:
            return None
        entry.refs += 1
        return entry.chunk

    def add(self, chunk: MediaChunk, pointer: int) -> None:
        assert chunk.identity not in self._entries
        self._entries[chunk.identity] = _CacheEntry(pointer, chunk, 1)

    def get(self, identity: str) -> tuple[int, MediaChunk] | None:
        entry = self._entries.get(identity)
        return None if entry is None else (entry.pointer, entry.chunk)

    def identities(self) -> frozenset[str]:
        return frozenset(self._entries)

    def refs(self, identity: str) -> int:
        entry = self._entries.get(identity)
        return entry.refs if entry else 0

    def release(self, identity: str) -> None:
        entry = self._entries.get(identity)
        if entry is None:
            return
        entry.refs -= 1
        if entry.refs <= 0:
            del self._entries[identity]
            self._free(entry.pointer)

    def clear(self) -> None:
        entries, self._entries = self._entries, {}
        for entry in entries.values():
            self._free(entry.pointer)
