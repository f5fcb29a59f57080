"""Where Hearth keeps its data and models.

platformdirs gives the same answer as QStandardPaths.AppDataLocation on every desktop,
without needing a QApplication (the CLI and `make run` use these paths too).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import platformdirs

from engine import EngineError

APP_NAME = "Hearth"


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
    """Isolated folders when given (tests, side-by-side installs), platform ones otherwise."""
    data = Path(data_dir).expanduser().resolve() if data_dir else default_data_dir()
    models = Path(models_dir).expanduser().resolve() if models_dir else data / "models"
    return AppPaths(data_dir=data, models_dir=models)
