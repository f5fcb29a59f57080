"""Where the model session stands (``app.services.model_session``): empty, loading, ready, failed."""

from __future__ import annotations

import enum


class SessionState(enum.Enum):
    EMPTY = "empty"
    LOADING = "loading"
    READY = "ready"
    FAILED = "failed"
