"""Errors the documents index raises for things a user can cause, each with one line to show.

They live here rather than in ``errors.py`` (the parsing side's) so the index can be written
and tested on its own; they are ordinary ``EngineError`` subclasses either way.
"""

from __future__ import annotations

from engine.base.errors import EngineError


class CollectionNotFound(EngineError):
    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"There is no collection named “{name}”.")


class CollectionExists(EngineError):
    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"A collection named “{name}” already exists.")


class InvalidCollectionName(EngineError):
    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__("A collection needs a name of one line, not empty.")


class EmbedderMismatch(EngineError):
    """The collection's vectors come from another model: mixing them would make search garbage."""

    def __init__(self, collection: str, indexed_with: str, given: str) -> None:
        self.collection = collection
        self.indexed_with = indexed_with
        self.given = given
        super().__init__(
            f"“{collection}” is indexed with {indexed_with}, not {given}: reindex it to change the model."
        )


class SchemaTooNew(EngineError):
    def __init__(self, found: int, known: int) -> None:
        self.found = found
        self.known = known
        super().__init__(
            f"The documents index was written by a newer Hearth (schema {found}, this one knows {known})."
        )
