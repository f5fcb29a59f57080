"""A row of the chat's model picker (``app.conversation.model_chooser`` makes them): a library
model with the verdict its remembered settings get, or a remote server's model."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine import RemoteModelInfo, Verdict


@dataclass(frozen=True)
class ModelChoice:
    """One row of the picker: a library model with its plan's verdict, or a remote model."""

    name: str
    detail: str  # "fits in RAM (CPU) · 24.0 MiB", "via 127.0.0.1:8080"
    path: Path | None = None  # a library model
    remote: RemoteModelInfo | None = None
    verdict: Verdict | None = None  # a library model's, with its remembered settings
    current: bool = False  # answers now, or is loading

    @property
    def is_remote(self) -> bool:
        return self.remote is not None
