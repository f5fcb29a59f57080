"""Generated token pieces (bytes that may end inside a UTF-8 character) turned into text
deltas that never split a character and never leak any part of a stop string."""

from __future__ import annotations

import codecs
from collections.abc import Iterable
from dataclasses import dataclass


class IncrementalDetokenizer:
    """Token pieces (bytes) in, text out, never splitting a UTF-8 character.

    Python's incremental decoder with ``errors="replace"`` keeps an incomplete trailing
    sequence for the next piece and only replaces bytes that can never become valid, so
    U+FFFD appears for truly invalid output, or at ``flush`` for a character the model
    never finished — not because a character was split across tokens.
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def push(self, piece: bytes) -> str:
        return self._decoder.decode(piece)

    def flush(self) -> str:
        """Release whatever is pending (an unfinished character becomes U+FFFD) and reset."""
        text = self._decoder.decode(b"", final=True)
        self._decoder.reset()
        return text

    @property
    def pending_bytes(self) -> int:
        return len(self._decoder.getstate()[0])


@dataclass(frozen=True)
class StreamChunk:
    """Text that is safe to show now, and the stop string that ended the stream, if any."""

    text: str
    stop_string: str | None = None

    @property
    def stopped(self) -> bool:
        return self.stop_string is not None


class StopStringBuffer:
    """Holds back text that might be the start of a stop string.

    ``push`` returns the text that can no longer be part of a stop string. When a stop
    string completes, the text before it is returned with ``stop_string`` set, and the
    stop string itself and anything after it are never returned. The stop string that
    completes first wins (ties: the one starting earliest), which makes the result
    independent of how the text was cut into pieces.
    """

    def __init__(self, stop_strings: Iterable[str]) -> None:
        self.stop_strings: tuple[str, ...] = tuple(dict.fromkeys(s for s in stop_strings if s))
        # Every proper prefix of a stop string: the suffixes worth holding back.
        self._prefixes = frozenset(s[:i] for s in self.stop_strings for i in range(1, len(s)))
        self._longest_prefix = max((len(p) for p in self._prefixes), default=0)
        self._held = ""
        self._stop: str | None = None

    @property
    def held(self) -> str:
        return self._held

    @property
    def stop_string(self) -> str | None:
        return self._stop

    @property
    def stopped(self) -> bool:
        return self._stop is not None

    def push(self, text: str) -> StreamChunk:
        if self._stop is not None:
            return StreamChunk("", self._stop)
        buffer = self._held + text
        match = self._first_match(buffer)
        if match is not None:
            start, stop = match
            self._held = ""
            self._stop = stop
            return StreamChunk(buffer[:start], stop)
        hold = self._hold_length(buffer)
        self._held = buffer[len(buffer) - hold :]
        return StreamChunk(buffer[: len(buffer) - hold])

    def flush(self) -> str:
        """The end of the stream: held text was not a stop string after all."""
        text, self._held = ("" if self._stop is not None else self._held), ""
        return text

    def _first_match(self, buffer: str) -> tuple[int, str] | None:
        best: tuple[int, int, str] | None = None  # (end, start, stop)
        for stop in self.stop_strings:
            start = buffer.find(stop)
            if start >= 0:
                key = (start + len(stop), start, stop)
                if best is None or key[:2] < best[:2]:
                    best = key
        return None if best is None else (best[1], best[2])

    def _hold_length(self, buffer: str) -> int:
        for k in range(min(len(buffer), self._longest_prefix), 0, -1):
            if buffer[-k:] in self._prefixes:
                return k
        return 0


class TextStream:
    """Generated pieces (bytes) in, safe text deltas out: UTF-8 assembled across pieces,
    stop strings cut out. One per generating request."""

    def __init__(self, stop_strings: Iterable[str] = ()) -> None:
        self._detokenizer = IncrementalDetokenizer()
        self._stops = StopStringBuffer(stop_strings)

    @property
    def stopped(self) -> bool:
        return self._stops.stopped

    def push(self, piece: bytes) -> StreamChunk:
        return self._stops.push(self._detokenizer.push(piece))

    def finish(self) -> StreamChunk:
        """End of generation: release held text (and any unfinished character as U+FFFD)."""
        chunk = self._stops.push(self._detokenizer.flush())
        if chunk.stopped:
            return chunk
        return StreamChunk(chunk.text + self._stops.flush())
