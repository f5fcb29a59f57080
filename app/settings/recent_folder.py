"""Where the file dialogs open: the folder the user last took models from."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

RECENT_FOLDER_KEY = "dialogs:models_folder"


class Settings(Protocol):
    """What this needs of the store."""

    def get_setting(self, key: str, default: Any = None) -> Any: ...

    def set_setting(self, key: str, value: Any) -> None: ...


@dataclass(frozen=True)
class RecentFolder:
    """The last folder models were added from (kept in the store's settings), else ``default``."""

    settings: Settings
    default: Path

    def get(self) -> Path:
        saved = self.settings.get_setting(RECENT_FOLDER_KEY)
        # A folder since deleted or unmounted would open the dialog somewhere arbitrary.
        for folder in (Path(saved) if isinstance(saved, str) else None, self.default):
            if folder is not None and folder.is_dir():
                return folder
        return Path.home()

    def remember(self, folder: Path) -> None:
        self.settings.set_setting(RECENT_FOLDER_KEY, str(folder))
