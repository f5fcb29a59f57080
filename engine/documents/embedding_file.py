"""Whether a GGUF is an embedding model, and what Hearth needs to run it as one: the pooling,
the positions it was trained on, the vector size (``read_embedding_model``).

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
        try:
            in_file = PoolingType(stored)
        except ValueError:
            raise NotAnEmbeddingModel(path, f"{name} has an unknown pooling type ({stored})") from None
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
