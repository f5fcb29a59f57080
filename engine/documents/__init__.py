"""Documents and retrieval: files into text, chunks, vectors and an index, without Qt.

Importing the package costs nothing: each name is imported from its module when first used
(numpy, gguf, PDFium and llama.cpp load only then).

The modules, bottom up:

- ``document``, ``parsing`` (+ one reader per kind), ``scanning``: files into sections of text
  with pages, headings and offsets; each file that cannot be read is one ``DocumentRefused`` line.
- ``chunking``: ``chunk_document``, by the embedder's tokens.
- ``bert_source``: a sentence-transformers BERT folder's files, hash, hyper-parameters and
  pooling; ``ConversionFailed``.
- ``bert_vocab``: its WordPiece vocabulary in llama.cpp's form.
- ``bert_convert``: Hearth's own converter of that folder into an f16 GGUF
  (``ensure_converted``; no torch).
- ``bert_text``: what BERT's own tokenizer does to a text that llama.cpp's does not
  (decomposing Hangul, [UNK] for over-long words), done before llama.cpp tokenizes.
- ``embedding_file``: whether a GGUF is an embedding model, its pooling and window
  (``read_embedding_model``), and what it costs in memory (``estimate_embedder_memory``).
- ``embedder_fit``: that memory planned for a machine by the planner's fit rule
  (``plan_embedder``); ``EmbedderDoesNotFit`` before anything is opened.
- ``embedding``: ``Embedder``, the model on a llama.cpp worker thread of its own
  (``open_embedder``); ``embedder_protocol``: ``TextEmbedder``, what the rest needs of one.
- ``index`` (+ ``index_schema``, ``index_store``, ``index_types``, ``index_inputs``,
  ``index_progress``, ``index_control``, ``index_errors``, ``indexing``): ``DocumentIndex``,
  collections in their own SQLite file, one transaction per file, incremental.
- ``vector_matrix``, ``fts_query``, ``retrieval``: ``retrieve``, BM25 and dense fused by RRF,
  neighbours joined, fitted to a budget; ``citations``: the numbered prompt block, ``[n]`` found;
  ``grounding``: the block put before the last question.
- ``yielding``: ``Courtesy`` and ``CourteousEmbedder``, an indexing run's embedder waiting
  between decodes while a chat generates.
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
    "ConversionFailed": "bert_source",
    "ensure_converted": "bert_convert",
    "EmbeddingModelInfo": "embedding_file",
    "NotAnEmbeddingModel": "embedding_file",
    "PoolingType": "embedding_file",
    "estimate_embedder_memory": "embedding_file",
    "is_embedding_model": "embedding_file",
    "read_embedding_model": "embedding_file",
    "EmbedderDoesNotFit": "embedder_fit",
    "EmbedderPlan": "embedder_fit",
    "check_embedder_fits": "embedder_fit",
    "plan_embedder": "embedder_fit",
    "Embedder": "embedding",
    "EmbedderClosed": "embedding",
    "EmbeddingFailed": "embedding",
    "open_embedder": "embedding",
    "TextEmbedder": "embedder_protocol",
    "DocumentIndex": "index",
    "IndexControl": "index_control",
    "CollectionExists": "index_errors",
    "CollectionNotFound": "index_errors",
    "EmbedderMismatch": "index_errors",
    "InvalidCollectionName": "index_errors",
    "SchemaTooNew": "index_errors",
    "ChunkSettings": "index_types",
    "CollectionInfo": "index_types",
    "DocumentInfo": "index_types",
    "DocumentStatus": "index_types",
    "IndexPhase": "index_types",
    "IndexProgress": "index_types",
    "IndexReport": "index_types",
    "ReindexPlan": "index_types",
    "StoredChunk": "index_store",
    "Excerpt": "retrieval",
    "Retrieval": "retrieval",
    "RetrievalMode": "retrieval",
    "retrieve": "retrieval",
    "Citation": "citations",
    "cited_numbers": "citations",
    "find_citations": "citations",
    "prompt_block": "citations",
    "ground_messages": "grounding",
    "grounded_text": "grounding",
    "excerpt_label": "citations",
    "Courtesy": "yielding",
    "CourtesyStats": "yielding",
    "CourteousEmbedder": "yielding",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
