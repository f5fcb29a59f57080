"""A small JSON file of verdicts keyed by what they are about (a build, a model header).

Shared by the checks that run llama.cpp in a child process once and remember the outcome
(engine/native/probe.py, engine/native/model_check.py). Several Hearth processes may use one file:
writes replace it atomically, and a lost race only costs a check run twice.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import platformdirs

log = logging.getLogger(__name__)


def cache_path(name: str) -> Path:
    """``name`` in Hearth's cache folder (~/.cache/Hearth on Linux)."""
    return Path(platformdirs.user_cache_dir("Hearth", appauthor=False)) / name


def read_verdicts(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def remember(path: Path, key: str, verdict: dict, keep: int = 2000) -> None:
    """Add ``verdict`` under ``key``, keeping the ``keep`` newest; a read-only disk only logs."""
    verdicts = read_verdicts(path)  # re-read: another process may have added to it
    verdicts.pop(key, None)
    verdicts[key] = verdict
    if len(verdicts) > keep:  # oldest first: dicts keep insertion order
        verdicts = dict(list(verdicts.items())[-keep:])
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(verdicts, indent=1) + "\n")
        os.replace(tmp, path)
    except OSError as exc:
        log.warning("could not remember a verdict in %s: %s", path, exc)
