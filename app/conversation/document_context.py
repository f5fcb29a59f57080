"""Documents for a reply (issue 28): where excerpts come from, and what a reply keeps of them.

``DocumentSource`` is what the chat needs of the documents service (``app/services/
documents.py``): the collections' names, and a search that answers on the GUI thread.
``Grounded`` is what one search gave a reply: a ``Retrieval`` (excerpts numbered as the prompt
gives them, perhaps none) or a one-line error; what the store keeps of it (``MessageSource``
rows, a ``Grounding``), the note the reply shows, and a ``Retrieval`` rebuilt from the stored
rows for a reply that goes on (Continue sends the same excerpts, so the prompt's prefix stays).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from app.chat import Source
from app.store.history import Grounding, Message, MessageSource
from engine import Excerpt, Retrieval, RetrievalMode

RetrievalCallback = Callable[[Retrieval | None, str | None], None]

SEARCHING = "Searching documents…"
NONE_FOUND_NOTE = "No excerpt of the documents matched this question: it was sent as typed."
WHOLE_NOTE = "The documents were given whole."
FAILED_NOTE = "The documents were not searched ({error}): the question was sent as typed."


class DocumentSource(Protocol):
    """The documents service as the chat uses it."""

    def collection_names(self) -> list[str]: ...

    def retrieve_async(
        self, names: list[str], question: str, context_tokens: int, callback: RetrievalCallback
    ) -> None:
        """Search ``names`` for ``question`` within a budget of the loaded ``context_tokens``;
        ``callback(retrieval, None)`` or ``callback(None, "one line")`` later, on the GUI thread."""
        ...


@dataclass(frozen=True)
class Grounded:
    """What a search gave a reply: ``retrieval``, or None and ``error`` when it failed."""

    retrieval: Retrieval | None
    error: str = ""

    @property
    def grounding(self) -> Grounding:
        if self.retrieval is None:
            return Grounding.FAILED
        if not self.retrieval.excerpts:
            return Grounding.NONE_FOUND
        return Grounding.WHOLE if self.retrieval.whole else Grounding.EXCERPTS

    def sources(self) -> tuple[MessageSource, ...]:
        excerpts = () if self.retrieval is None else self.retrieval.excerpts
        return tuple(
            MessageSource(e.n, e.path, e.page, e.heading, e.text, e.start, e.end, e.last_page, e.collection)
            for e in excerpts
        )


def stored_retrieval(message: Message, question: str) -> Grounded | None:
    """What a stored reply was given, as a ``Grounded`` to send again (None: it was not
    grounded; a search that failed or found nothing gives the question as typed again)."""
    if message.grounding is None:
        return None
    excerpts = tuple(
        Excerpt(s.n, s.collection, s.path, s.page, s.last_page, s.heading, s.text, 0.0, (), s.start, s.end, 0)
        for s in message.sources
    )
    whole = message.grounding is Grounding.WHOLE
    return Grounded(Retrieval(question, excerpts, whole, RetrievalMode.HYBRID, 0))


def documents_note(grounding: Grounding | None, detail: str = "") -> str:
    """The line under a reply about its documents ("" for none to say)."""
    if grounding is Grounding.NONE_FOUND:
        return NONE_FOUND_NOTE
    if grounding is Grounding.WHOLE:
        return WHOLE_NOTE
    if grounding is Grounding.FAILED:
        return FAILED_NOTE.format(error=detail.rstrip(".") or "unknown error")
    return ""


def view_sources(sources: Sequence[MessageSource]) -> tuple[Source, ...]:
    """The stored sources as the message view takes them."""
    return tuple(
        Source(s.n, str(s.path), s.page, s.heading, s.text, s.start, s.end, s.last_page) for s in sources
    )
