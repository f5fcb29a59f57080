"""Where Hearth keeps its data and models.

platformdirs gives the same answer as QStandardPaths.AppDataLocation on every desktop,
without needing a QApplication (the CLI and `make run` use these paths too).
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import platformdirs

from engine import EngineError

APP_NAME = "Hearth"
# settings.json's key for the models folder chosen in Settings → General: kept in that file,
# not the store, as it is needed before the store opens and by the CLI (`hearth pull`).
MODELS_DIR_KEY = "models_dir"


@dataclass(frozen=True)
class AppPaths:
    data_dir: Path
    models_dir: Path

    @property
    def library_file(self) -> Path:
        return self.data_dir / "library.json"

    @property
    def settings_file(self) -> Path:
        return self.data_dir / "settings.json"

    @property
    def workers_file(self) -> Path:
        """The RPC workers the user added (``host:port``), kept apart from other settings."""
        return self.data_dir / "workers.json"

    @property
    def database_file(self) -> Path:
        return self.data_dir / "hearth.sqlite3"

    @property
    def documents_file(self) -> Path:
        """The documents index (collections, chunks, vectors): its own SQLite file, so
        indexing never locks the chat store."""
        return self.data_dir / "documents.sqlite3"

    @property
    def mcp_config(self) -> Path:
        """The MCP servers Hearth may start (docs/TOOLS.md), in the ``mcpServers`` shape."""
        return self.data_dir / "mcp.json"

    @property
    def embedders_dir(self) -> Path:
        """Embedding models Hearth made itself (the default one, converted at setup)."""
        return self.data_dir / "embedders"

    def check(self) -> AppPaths:
        """Refuse, in one line, folders that are files (a typo in --data-dir must not traceback)."""
        for option, folder in (("--data-dir", self.data_dir), ("--models-dir", self.models_dir)):
            for path in (folder, *folder.parents):
                if path.exists() and not path.is_dir():
                    raise DataFolderUnusable(f"{option} {folder}: {path} is a file, not a folder.")
        return self

    def ensure(self) -> AppPaths:
        self.check()
        try:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            self.models_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            why = f"{exc.strerror}: {exc.filename}"
            raise DataFolderUnusable(f"Cannot create Hearth's folders: {why}") from None
        return self


class DataFolderUnusable(EngineError):
    """A data or models folder that cannot be used (a file in the way, no permission)."""


def default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def resolve_paths(data_dir: Path | str | None = None, models_dir: Path | str | None = None) -> AppPaths:
    """Isolated folders when given (tests, side-by-side installs), platform ones otherwise;
    without ``--models-dir``, the models folder chosen in Settings, else ``data/models``."""
    data = Path(data_dir).expanduser().resolve() if data_dir else default_data_dir()
    paths = AppPaths(data_dir=data, models_dir=data / "models")
    if models_dir:
        return replace(paths, models_dir=Path(models_dir).expanduser().resolve())
    return replace(paths, models_dir=saved_models_dir(paths.settings_file) or paths.models_dir)


def read_settings_file(settings_file: Path) -> dict[str, Any]:
    """settings.json as a dict; {} when missing or unreadable (a hand edit gone wrong)."""
    try:
        everything = json.loads(settings_file.read_text())
    except (OSError, ValueError):
        return {}
    return everything if isinstance(everything, dict) else {}


def write_settings_key(paths: AppPaths, key: str, value: Any) -> None:
    """Set one top-level key of settings.json, keeping the others; atomic."""
    everything = read_settings_file(paths.settings_file)
    everything[key] = value
    paths.data_dir.mkdir(parents=True, exist_ok=True)
    tmp = paths.settings_file.with_name(paths.settings_file.name + ".tmp")
    tmp.write_text(json.dumps(everything, indent=2))
    os.replace(tmp, paths.settings_file)


def saved_models_dir(settings_file: Path) -> Path | None:
    """The folder chosen in Settings, if it is still there: an unmounted disk must not stop
    Hearth from starting (the default folder is used meanwhile)."""
    value = read_settings_file(settings_file).get(MODELS_DIR_KEY)
    if not isinstance(value, str) or not value:
        return None
    folder = Path(value)
    return folder if folder.is_absolute() and folder.is_dir() else None


def usable_models_dir(folder: Path | str) -> Path:
    """``folder`` made absolute, created if missing, and proven writable (downloads land in
    it); else DataFolderUnusable in one line."""
    path = Path(folder).expanduser()
    if not str(folder).strip() or not path.is_absolute():
        raise DataFolderUnusable(f"{folder or 'An empty name'} is not a full path to a folder.")
    path = path.resolve()
    for parent in (path, *path.parents):
        if parent.exists() and not parent.is_dir():
            raise DataFolderUnusable(f"{path}: {parent} is a file, not a folder.")
    try:
        path.mkdir(parents=True, exist_ok=True)
        # A file made and removed: permission bits say too little (root, read-only mounts).
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        raise DataFolderUnusable(f"Cannot write to {path}: {exc.strerror or exc}.") from None
    return path


def save_models_dir(paths: AppPaths, folder: Path | str) -> AppPaths:
    """Settings → General's models folder: checked, remembered for the next start, and
    returned as the paths to use from now on."""
    models = usable_models_dir(folder)
    write_settings_key(paths, MODELS_DIR_KEY, str(models))
    return replace(paths, models_dir=models)
