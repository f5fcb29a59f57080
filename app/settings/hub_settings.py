"""The Hub's settings: the endpoint (a mirror) and parallel downloads in ``settings.json``;
the token only in the system keyring (or ``HF_TOKEN``), never in a plain file."""

from __future__ import annotations

import contextlib
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from app.platform.paths import AppPaths, read_settings_file, write_settings_key
from engine import DEFAULT_PARALLEL, EngineError, HubAccess, resolve_endpoint

MAX_PARALLEL_DOWNLOADS = 8  # the most the settings offer (and accept from settings.json)
KEYRING_SERVICE = "Hearth"
KEYRING_USER = "huggingface-token"


class KeyringUnavailable(EngineError):
    """No system keyring to keep a token in."""


@dataclass(frozen=True)
class HubSettings:
    endpoint: str | None = None  # None: HF_ENDPOINT, else huggingface.co
    max_parallel: int = DEFAULT_PARALLEL


def load_settings(paths: AppPaths) -> HubSettings:
    try:
        data = read_settings_file(paths.settings_file).get("hub", {})
        parallel = min(MAX_PARALLEL_DOWNLOADS, max(1, int(data.get("max_parallel", DEFAULT_PARALLEL))))
        return HubSettings(endpoint=data.get("endpoint") or None, max_parallel=parallel)
    except (OSError, ValueError, AttributeError, TypeError):
        return HubSettings()


def save_settings(paths: AppPaths, settings: HubSettings) -> None:
    if settings.endpoint:
        resolve_endpoint(settings.endpoint)  # refuse a malformed address before saving it
    write_settings_key(paths, "hub", asdict(settings))


def read_token() -> str | None:
    """``HF_TOKEN`` when set, else the keyring's; None when neither has one."""
    if token := os.environ.get("HF_TOKEN", "").strip():
        return token
    try:
        import keyring
        from keyring.errors import KeyringError

        try:
            return keyring.get_password(KEYRING_SERVICE, KEYRING_USER) or None
        except (KeyringError, RuntimeError):
            return None
    except ImportError:
        return None


def store_token(token: str | None) -> None:
    """Keep ``token`` in the system keyring (None or "" forgets it)."""
    try:
        import keyring
        from keyring.errors import KeyringError, NoKeyringError, PasswordDeleteError
    except ImportError:
        raise KeyringUnavailable("No keyring support installed: set HF_TOKEN instead.") from None
    try:
        if token:
            keyring.set_password(KEYRING_SERVICE, KEYRING_USER, token.strip())
        else:
            with contextlib.suppress(PasswordDeleteError):
                keyring.delete_password(KEYRING_SERVICE, KEYRING_USER)
    except NoKeyringError:
        raise KeyringUnavailable(
            "This system has no keyring to keep the token in: set HF_TOKEN in the environment instead."
        ) from None
    except (KeyringError, RuntimeError) as exc:
        raise KeyringUnavailable(f"The system keyring refused the token: {exc}") from None


def hub_access(paths: AppPaths, settings: HubSettings | None = None) -> HubAccess:
    settings = settings or load_settings(paths)
    return HubAccess.from_settings(settings.endpoint, read_token())


def header_cache_dir(paths: AppPaths) -> Path:
    return paths.data_dir / "hub-headers"


def with_endpoint(settings: HubSettings, endpoint: str | None) -> HubSettings:
    return replace(settings, endpoint=(endpoint or "").strip() or None)
