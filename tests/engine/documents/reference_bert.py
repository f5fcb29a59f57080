"""The reference the embedder is checked against: sentence-transformers' all-MiniLM-L6-v2
computed here in numpy float64 from the same safetensors weights, tokenized by the
``tokenizers`` library's WordPiece (the package's own tokenizer.json).

BERT as transformers' ``BertModel`` computes it (post-layer-norm encoder, exact erf GELU),
then sentence-transformers' mean pooling over every token and its L2 normalisation. No
llama.cpp, gguf or Hearth code runs here.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np


def erf(x: np.ndarray) -> np.ndarray:
    """The error function to within 1e-14 (``math.erf`` element by element is 50x slower):
    its Taylor series below 2.5, the continued fraction of erfc above."""
    x = np.asarray(x, dtype=np.float64)
    z = np.abs(x)
    out = np.empty_like(z)
    small = z < 2.5
    zs = z[small]
    z2 = zs * zs
    term = np.ones_like(zs)
    total = np.ones_like(zs)
    for n in range(1, 45):
        term *= -z2 / n
        total += term / (2 * n + 1)
    out[small] = 2.0 / math.sqrt(math.pi) * zs * total
    zl = z[~small]
    fraction = zl.copy()
    for k in range(60, 0, -1):
        fraction = zl + (k / 2.0) / fraction
    out[~small] = 1.0 - np.exp(-zl * zl) / (math.sqrt(math.pi) * fraction)
    return np.sign(x) * out


class ReferenceBert:
    def __init__(self, folder: Path, max_tokens: int = 512) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        self.config = json.loads((folder / "config.json").read_text())
        raw = load_file(str(folder / "model.safetensors"))
        self.w = {
            k.removeprefix("bert."): v.astype(np.float64) for k, v in raw.items() if v.dtype.kind == "f"
        }
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.no_padding()
        # tokenizer.json says 128 (what sentence-transformers trained with); the embedder's
        # window is the model's 512 positions, and so is the reference's.
        self.tokenizer.enable_truncation(max_length=max_tokens)
        self.eps = float(self.config.get("layer_norm_eps", 1e-12))
        self.n_head = int(self.config["num_attention_heads"])

    def tokenize(self, text: str) -> list[int]:
        """[CLS] text [SEP], cut to the window as transformers cuts it."""
        return list(self.tokenizer.encode(text).ids)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def embed(self, text: str) -> np.ndarray:
        return self.embed_ids(self.tokenize(text))

    def embed_ids(self, ids: list[int]) -> np.ndarray:
        hidden = self.hidden_states(ids)
        pooled = hidden.mean(axis=0)
        return pooled / np.linalg.norm(pooled)

    def hidden_states(self, ids: list[int]) -> np.ndarray:
        w, n = self.w, len(ids)
        x = w["embeddings.word_embeddings.weight"][ids]
        x = x + w["embeddings.position_embeddings.weight"][:n]
        x = x + w["embeddings.token_type_embeddings.weight"][0]
        x = self._norm(x, "embeddings.LayerNorm")
        for i in range(int(self.config["num_hidden_layers"])):
            p = f"encoder.layer.{i}."
            attention = self._attention(x, p + "attention.")
            x = self._norm(x + attention, p + "attention.output.LayerNorm")
            inner = self._gelu(self._linear(x, p + "intermediate.dense"))
            x = self._norm(x + self._linear(inner, p + "output.dense"), p + "output.LayerNorm")
        return x

    def _attention(self, x: np.ndarray, p: str) -> np.ndarray:
        h, dh = self.n_head, x.shape[1] // self.n_head

        q, k, v = (self._linear(x, p + f"self.{name}") for name in ("query", "key", "value"))
        context = np.empty_like(x)
        for head in range(h):  # 2-D products: BLAS (stacked ones on strided views are not)
            cols = slice(head * dh, (head + 1) * dh)
            scores = np.ascontiguousarray(q[:, cols]) @ np.ascontiguousarray(k[:, cols]).T / math.sqrt(dh)
            scores -= scores.max(axis=-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(axis=-1, keepdims=True)
            context[:, cols] = probs @ np.ascontiguousarray(v[:, cols])
        return self._linear(context, p + "output.dense")

    def _linear(self, x: np.ndarray, name: str) -> np.ndarray:
        return x @ self.w[name + ".weight"].T + self.w[name + ".bias"]

    def _norm(self, x: np.ndarray, name: str) -> np.ndarray:
        mean = x.mean(axis=-1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
        return (x - mean) / np.sqrt(var + self.eps) * self.w[name + ".weight"] + self.w[name + ".bias"]

    @staticmethod
    def _gelu(x: np.ndarray) -> np.ndarray:
        return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))
