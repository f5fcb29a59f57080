"""The user's preferences (Settings → General, Hardware, Appearance): one typed accessor each,
one default each, stored as JSON in the store's settings table."""

from __future__ import annotations

from dataclasses import replace
from enum import Enum
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from app.chat.sampling_panel import SamplingSettings

from engine import MAX_THREADS


class SettingsStore(Protocol):
    def get_setting(self, key: str, default: Any = None) -> Any: ...

    def set_setting(self, key: str, value: Any) -> None: ...


class Theme(Enum):
    SYSTEM = "system"
    LIGHT = "light"
    DARK = "dark"


# Keys and defaults, the one source for each.
LOAD_LAST_MODEL_KEY = "pref:load_last_model"
LAST_MODEL_KEY = "pref:last_model"
DEFAULT_THREADS_KEY = "pref:default_threads"
DEFAULT_GPU_LAYERS_KEY = "pref:default_gpu_layers"
DEFAULT_SYSTEM_PROMPT_KEY = "pref:default_system_prompt"
DEFAULT_SAMPLING_KEY = "pref:default_sampling"
THEME_KEY = "pref:theme"
FONT_SIZE_KEY = "pref:font_size"

MIN_FONT_SIZE, MAX_FONT_SIZE = 7, 32


class Preferences:
    """Typed reads with their defaults, tolerant of values a newer or broken version left."""

    def __init__(self, store: SettingsStore) -> None:
        self._store = store

    # General
    def load_last_model(self) -> bool:
        return bool(self._store.get_setting(LOAD_LAST_MODEL_KEY, True))

    def set_load_last_model(self, on: bool) -> None:
        self._store.set_setting(LOAD_LAST_MODEL_KEY, bool(on))

    def last_model(self) -> str | None:
        """The path of the model loaded last (local models only)."""
        value = self._store.get_setting(LAST_MODEL_KEY)
        return value if isinstance(value, str) and value else None

    def set_last_model(self, path: str | None) -> None:
        self._store.set_setting(LAST_MODEL_KEY, path)

    def default_system_prompt(self) -> str:
        value = self._store.get_setting(DEFAULT_SYSTEM_PROMPT_KEY, "")
        return value if isinstance(value, str) else ""

    def set_default_system_prompt(self, text: str) -> None:
        self._store.set_setting(DEFAULT_SYSTEM_PROMPT_KEY, text)

    def default_sampling(self) -> dict[str, Any] | None:
        """The sampling a new conversation starts with (None: the engine's defaults)."""
        value = self._store.get_setting(DEFAULT_SAMPLING_KEY)
        return value if isinstance(value, dict) else None

    def set_default_sampling(self, value: dict[str, Any] | None) -> None:
        self._store.set_setting(DEFAULT_SAMPLING_KEY, value)

    def new_conversation_settings(self) -> SamplingSettings:
        """What a new conversation starts with: the default sampling and system prompt."""
        # Imported here: the CLI reads preferences too and must not pay for the chat widgets.
        from app.chat.sampling_panel import SamplingSettings

        engine = SamplingSettings()
        saved = self.default_sampling() or {}
        # Numbers only, each of its field's kind: a value left by another version is dropped.
        sampling = {
            name: value
            for name, value in saved.items()
            if name != "system_prompt"
            and hasattr(engine, name)
            and not isinstance(value, bool)
            and isinstance(value, int | float)
            and (isinstance(value, int) or isinstance(getattr(engine, name), float))
        }
        return replace(SamplingSettings.from_dict(sampling), system_prompt=self.default_system_prompt())

    # Hardware
    def default_threads(self) -> int:
        """CPU threads for a model without its own setting; 0 means the planner chooses."""
        return _int_in(self._store.get_setting(DEFAULT_THREADS_KEY, 0), 0, MAX_THREADS, 0)

    def set_default_threads(self, threads: int) -> None:
        self._store.set_setting(DEFAULT_THREADS_KEY, _int_in(threads, 0, MAX_THREADS, 0))

    def default_gpu_layers(self) -> int | None:
        """GPU layers for a model without its own setting; None means the planner chooses."""
        value = self._store.get_setting(DEFAULT_GPU_LAYERS_KEY)
        return None if value is None else _int_in(value, 0, 10_000, None)

    def set_default_gpu_layers(self, layers: int | None) -> None:
        self._store.set_setting(DEFAULT_GPU_LAYERS_KEY, None if layers is None else max(0, int(layers)))

    # Appearance
    def theme(self) -> Theme:
        try:
            return Theme(self._store.get_setting(THEME_KEY, Theme.SYSTEM.value))
        except ValueError:
            return Theme.SYSTEM

    def set_theme(self, theme: Theme) -> None:
        self._store.set_setting(THEME_KEY, theme.value)

    def font_size(self) -> int:
        """Point size of the window's text; 0 means the system's."""
        value = _int_in(self._store.get_setting(FONT_SIZE_KEY, 0), 0, MAX_FONT_SIZE, 0)
        return value if value == 0 or value >= MIN_FONT_SIZE else 0

    def set_font_size(self, points: int) -> None:
        self._store.set_setting(FONT_SIZE_KEY, _int_in(points, 0, MAX_FONT_SIZE, 0))


def _int_in(value: Any, low: int, high: int, fallback: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return fallback
    number = int(value)
    return number if low <= number <= high else fallback
