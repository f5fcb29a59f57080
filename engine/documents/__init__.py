"""Documents and retrieval: files into text, chunks, vectors and an index, without Qt.

Importing the package costs nothing: each name is imported from its module when first used
(numpy, gguf, PDFium and llama.cpp load only then).

The modules, bottom up:

- ``document``, ``parsing`` (+ one reader per kind), ``scanning``: files into sections of text
  with pages, headings and offsets; each file that cannot be read is one ``DocumentRefused`` line.
- ``chunking``: ``chunk_document``, by the embedder's tokens.
"""

from engine.base.lazy import lazy_exports

_EXPORTS = {
    "CollectionError": "errors",
    "DocumentError": "errors",
    "DocumentRefused": "errors",
    "DocumentKind": "document",
    "ParsedDocument": "document",
    "Section": "document",
    "full_text": "document",
    "kind_for": "parsing",
    "parse_document": "parsing",
    "ScanResult": "scanning",
    "scan_paths": "scanning",
    "Chunk": "chunking",
    "chunk_document": "chunking",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
