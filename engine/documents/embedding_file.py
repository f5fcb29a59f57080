"""Whether a GGUF is an embedding model, and what Hearth needs to run it as one: the pooling,
the positions it was trained on, the vector size (``read_embedding_model``), and the memory
it takes once loaded (``estimate_embedder_memory``).

Read from the header only (``engine.catalog.inspect``): a chat model picked as the embedder
is refused in one line before llama.cpp sees it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path

from engine.base.errors import EngineError
from engine.catalog import ModelInfo, ModelKind, inspect
from engine.documents.bert_text import BertText

# Encoders llama.cpp runs without causal attention, pooling their outputs into one vector.
ENCODER_ARCHITECTURES = frozenset(
    {
        "bert",
        "nomic-bert",
        "nomic-bert-moe",
        "jina-bert-v2",
        "jina-bert-v3",
        "modern-bert",
        "neo-bert",
        "eurobert",
    }
)
F32 = 4
# Host memory beyond llama.cpp's named buffers: graph metadata, threads' stacks, the
# context's own tables, the embedder's batch arrays (measured with all-MiniLM-L6-v2:
# benchmarks/bench_embedding.py).
EMBEDDER_FIXED_BYTES = 8 << 20
# The most tokens one text is embedded with, whatever longer the model was trained on: the
# chunks Hearth embeds are far shorter, and every token past this costs compute and memory
# (a non-causal micro-batch holds every text of the batch at once).
MAX_WINDOW = 512


class PoolingType(enum.IntEnum):
    """llama.cpp's ``llama_pooling_type`` values (UNSPECIFIED: -1, from the file)."""

    NONE = 0
    MEAN = 1
    CLS = 2
    LAST = 3
    RANK = 4


class NotAnEmbeddingModel(EngineError):
    """A GGUF that cannot serve as the embedding model (a chat model, a reranker)."""

    def __init__(self, path: Path, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(reason)


@dataclass(frozen=True)
class EmbeddingModelInfo:
    """An embedding model's header, as the embedder uses it."""

    model: ModelInfo
    pooling: PoolingType  # what the embedder asks llama.cpp for: MEAN, CLS or LAST
    pooling_in_file: PoolingType | None  # what the file says (None: nothing)
    causal: bool  # attention: True for a decoder trained as an embedder (e.g. Qwen3-Embedding)
    n_ctx_train: int
    n_embd: int
    bert_text: BertText | None = None  # a WordPiece vocabulary: BERT's normalizer settings

    @property
    def path(self) -> Path:
        return self.model.path

    @property
    def architecture(self) -> str:
        return self.model.architecture

    @property
    def window(self) -> int:
        """The most tokens of one text, specials included: longer texts are cut to it."""
        return min(self.n_ctx_train, MAX_WINDOW)


def is_embedding_model(info: ModelInfo) -> bool:
    """An encoder architecture, or a file that says how to pool or that attention is not causal."""
    arch = info.architecture
    if arch in ENCODER_ARCHITECTURES:
        return True
    meta = info.metadata
    return f"{arch}.pooling_type" in meta or meta.get(f"{arch}.attention.causal") is False


def describe_embedding_model(info: ModelInfo) -> EmbeddingModelInfo:
    """``info`` as an embedding model, or NotAnEmbeddingModel with the one-line reason."""
    path, arch = info.path, info.architecture
    name = info.display_name
    if not is_embedding_model(info):
        kind = "chat model" if info.has_chat_template else "text generation model"
        raise NotAnEmbeddingModel(
            path,
            f"{name} is a {kind} ({arch}), not an embedding model: choose one such as all-MiniLM-L6-v2",
        )
    stored = info.metadata.get(f"{arch}.pooling_type")
    in_file: PoolingType | None = None
    if isinstance(stored, int) and not isinstance(stored, bool):
        in_file = PoolingType(stored)  # the catalog refused anything outside 0..4
    if in_file is PoolingType.RANK:
        raise NotAnEmbeddingModel(path, f"{name} is a reranker (rank pooling), not an embedding model")
    # A file without pooling (or NONE: one vector per token) is pooled by mean, as
    # sentence-transformers pools most models.
    pooling = (
        in_file if in_file in (PoolingType.MEAN, PoolingType.CLS, PoolingType.LAST) else PoolingType.MEAN
    )
    n_ctx, n_embd = info.context_length, info.embedding_length
    if not n_ctx or not n_embd:
        raise NotAnEmbeddingModel(path, f"{name} does not say its context length and vector size")
    causal = info.metadata.get(f"{arch}.attention.causal", arch not in ENCODER_ARCHITECTURES)
    return EmbeddingModelInfo(
        model=info,
        pooling=pooling,
        pooling_in_file=in_file,
        causal=bool(causal),
        n_ctx_train=n_ctx,
        n_embd=n_embd,
        bert_text=_bert_text(info),
    )


def _bert_text(info: ModelInfo) -> BertText | None:
    """llama.cpp's defaults for a WordPiece vocabulary: lowercase, and strip accents when
    lowercasing (llama_vocab::impl::load)."""
    if info.tokenizer_model != "bert":
        return None
    lowercase = info.metadata.get("tokenizer.ggml.normalizer.lowercase", True)
    strip = info.metadata.get("tokenizer.ggml.normalizer.strip_accents", lowercase)
    return BertText(lowercase=bool(lowercase), strip_accents=bool(strip))


def read_embedding_model(path: Path | str) -> EmbeddingModelInfo:
    """Read ``path``'s header: InvalidModelFile for a damaged GGUF, NotAnEmbeddingModel for one
    that is not an embedder."""
    return describe_embedding_model(inspect(Path(path), ModelKind.TEXT, embedding=True))


@dataclass(frozen=True)
class EmbedderMemory:
    """What an open embedder holds, buffer by buffer (bytes)."""

    weights: int  # the mapped file's tensors, all resident once a batch has run
    output: int  # llama.cpp's output buffer, cleared (so resident) when reserved
    compute: int  # the scheduler's buffer for one full micro-batch
    runtime: int  # the vocabulary's tables and the fixed working set

    @property
    def total(self) -> int:
        return self.weights + self.output + self.compute + self.runtime


def embedder_memory(info: EmbeddingModelInfo) -> EmbedderMemory:
    """The embedder's memory, as the planner adds up a chat model's.

    Context n_ctx = n_batch = n_ubatch = window (engine/documents/embedding.py). llama.cpp
    reserves logits for every output row even in embedding mode (output_reserve:
    has_logits is always true), and a pooled batch outputs every token: window rows of
    n_vocab + n_embd floats, 63 MiB for MiniLM's 30,522 tokens at 512. The compute buffer
    (flash attention, no KV cache for an encoder) holds one layer's widest activations
    for the micro-batch and its f16 mask.
    """
    from engine.planner import VOCAB_BYTES_PER_TOKEN

    model = info.model
    tokens = info.window
    n_vocab = model.vocab_size or 0
    n_ff = model.feed_forward_length or 4 * info.n_embd
    output = tokens * (n_vocab + info.n_embd) * F32
    compute = tokens * (n_ff + 4 * info.n_embd) * F32 + tokens * tokens * 2
    if info.causal:  # a decoder embedder's KV cache: window cells, f16 K and V per layer
        heads_kv = model.head_count_kv or model.head_count or 1
        width = (model.key_length or 0) + (model.value_length or 0)
        compute += (model.block_count or 0) * tokens * heads_kv * width * 2
    runtime = n_vocab * VOCAB_BYTES_PER_TOKEN + EMBEDDER_FIXED_BYTES
    return EmbedderMemory(weights=model.tensor_bytes, output=output, compute=compute, runtime=runtime)


def estimate_embedder_memory(info: EmbeddingModelInfo) -> int:
    """Bytes an open embedder adds to the process (``embedder_memory(info).total``)."""
    return embedder_memory(info).total
