"""Where the local API server stands (``app.services.local_server``): off, starting, on, failed."""

from __future__ import annotations

import enum


class ServerStatus(enum.Enum):
    OFF = "off"
    STARTING = "starting"
    ON = "on"
    FAILED = "failed"  # could not listen: ``error`` says why
