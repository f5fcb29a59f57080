"""``POST /v1/embeddings`` in OpenAI's shape, on the embedding model the server was given.

``input`` is a string or a list of strings (token arrays are refused: the server does not
expose its embedder's vocabulary); every text goes to the ``Embedder`` in one call, which
packs them into llama.cpp batches on its own thread. That call runs on a worker thread, so
the event loop (the window's, in the app) never waits for it.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from app.api import fields
from app.api.errors import ApiError, ErrorType, bad_request
from engine import TextEmbedder

EmbedderProvider = Callable[[], TextEmbedder | None]
"""The embedding model to serve now (None: none is available)."""

# OpenAI's own limit on inputs per request.
MAX_INPUTS = 2048
ENCODINGS = ("float", "base64")
_KNOWN = frozenset({"input", "model", "encoding_format", "dimensions", "user"})


@dataclass(frozen=True)
class EmbeddingsRequest:
    texts: tuple[str, ...]
    encoding: str  # "float" | "base64"


def no_embedder() -> ApiError:
    return ApiError(
        404,
        "No embedding model is available in Hearth: start `hearth serve` with --embedding-model GGUF.",
        ErrorType.NOT_FOUND,
        param="model",
        code="model_not_found",
    )


def embedder_refused(reason: str) -> ApiError:
    """The embedding model was not opened: it does not fit this machine (``reason``, one line)."""
    return ApiError(503, reason, ErrorType.UNAVAILABLE, param="model", code="embedder_does_not_fit")


def model_id(embedder: TextEmbedder) -> str:
    """The name responses carry: the GGUF's file name without its hash or extension."""
    return Path(embedder.name.rsplit(":", 1)[0]).stem


def read_request(body: Mapping[str, Any], dim: int) -> EmbeddingsRequest:
    unknown = sorted(k for k in body if k not in _KNOWN)
    if unknown:
        raise bad_request(f"Unsupported field: '{unknown[0][:40]}'.", unknown[0])
    fields.string(body, "model", "")
    fields.string(body, "user", "")
    encoding = fields.string(body, "encoding_format", "float")
    if encoding not in ENCODINGS:
        raise bad_request(
            f"'encoding_format' must be 'float' or 'base64', not {encoding[:20]!r}.", "encoding_format"
        )
    dimensions = fields.integer(body, "dimensions", None, 1)
    if dimensions is not None and dimensions != dim:
        raise bad_request(
            f"'dimensions' must be this model's own, {dim}: its vectors cannot be shortened.", "dimensions"
        )
    return EmbeddingsRequest(_texts(body.get("input")), encoding)


def _texts(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        texts: Sequence[object] = [value]
    elif isinstance(value, list):
        texts = value
    else:
        raise fields.wrong_type("input", "a string or an array of strings", value)
    if not texts:
        raise bad_request("'input' must not be an empty array.", "input")
    if len(texts) > MAX_INPUTS:
        raise bad_request(f"'input' may hold at most {MAX_INPUTS} texts, not {len(texts)}.", "input")
    for i, text in enumerate(texts):
        if isinstance(text, int | list) and not isinstance(text, bool):
            raise bad_request("'input' as token ids is not supported here: send the texts.", "input")
        if not isinstance(text, str):
            raise fields.wrong_type(f"input[{i}]", "a string", text)
        if not text:
            raise bad_request(f"'input[{i}]' is empty: there is nothing to embed.", "input")
    return tuple(texts)  # type: ignore[arg-type]


def _embed(embedder: TextEmbedder, texts: Sequence[str]) -> tuple[np.ndarray, int]:
    """Vectors and the tokens they cost (each text's, cut at the window as it is embedded)."""
    vectors = embedder.embed(texts)
    tokens = sum(min(embedder.count_tokens(t), embedder.window) for t in texts)
    return vectors, tokens


def _encoded(vector: np.ndarray, encoding: str) -> list[float] | str:
    if encoding == "base64":
        # OpenAI's: the little-endian float32 bytes, base64 (what its SDK decodes with numpy).
        return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")
    return [float(x) for x in vector]


async def embeddings_response(
    body: Mapping[str, Any], embedder: TextEmbedder | None, refusal: str | None = None
) -> dict[str, Any]:
    if embedder is None:
        raise embedder_refused(refusal) if refusal is not None else no_embedder()
    asked = read_request(body, embedder.dim)
    vectors, tokens = await asyncio.to_thread(_embed, embedder, asked.texts)
    return {
        "object": "list",
        "data": [
            {"object": "embedding", "index": i, "embedding": _encoded(v, asked.encoding)}
            for i, v in enumerate(vectors)
        ],
        "model": model_id(embedder),
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }
