"""API keys of remote servers: in the system keyring (``keyring``: Secret Service, KWallet,
macOS Keychain, Windows Credential Locker), never in Hearth's own files.

Where no keyring backend works (a bare desktop, a container), keys are kept in memory for
this session only, and ``problem`` says so in one line for the settings to show.
"""

from __future__ import annotations

import contextlib
from typing import Protocol

SERVICE = "Hearth remote servers"  # the keyring's service name; the user name is the base URL
NO_KEYRING = (
    "No system keyring is available here: API keys are kept for this session only "
    "(enter them again after a restart)."
)


class KeyringBackend(Protocol):
    """What Hearth uses of a keyring (the ``keyring`` module, or a test's stand-in)."""

    def get_password(self, service: str, username: str) -> str | None: ...
    def set_password(self, service: str, username: str, password: str) -> None: ...
    def delete_password(self, service: str, username: str) -> None: ...


def system_keyring() -> tuple[KeyringBackend | None, str]:
    """The ``keyring`` module when a real backend is there, else None and why not."""
    try:
        import keyring
        from keyring.backends import fail
    except ImportError:
        return None, NO_KEYRING
    try:
        backend = keyring.get_keyring()
    except Exception:  # a broken backend configuration
        return None, NO_KEYRING
    if isinstance(backend, fail.Keyring) or getattr(backend, "priority", 1) <= 0:
        return None, NO_KEYRING
    return keyring, ""


class KeyVault:
    """``get``/``set``/``delete`` a server's key; falls back to memory where the keyring fails."""

    def __init__(self, backend: KeyringBackend | None = None, problem: str = "") -> None:
        self._backend = backend
        self.problem = problem if backend is not None or problem else NO_KEYRING
        self._session: dict[str, str] = {}  # keys the keyring could not take

    @classmethod
    def system(cls) -> KeyVault:
        backend, problem = system_keyring()
        return cls(backend, problem)

    @property
    def persistent(self) -> bool:
        return self._backend is not None and not self.problem

    def get(self, base_url: str) -> str:
        if base_url in self._session:
            return self._session[base_url]
        if self._backend is None:
            return ""
        try:
            return self._backend.get_password(SERVICE, base_url) or ""
        except Exception:  # a locked or broken keyring reads as no key; the server says 401
            return ""

    def set(self, base_url: str, key: str) -> None:
        if not key:
            self.delete(base_url)
            return
        if self._backend is not None:
            try:
                self._backend.set_password(SERVICE, base_url, key)
                self._session.pop(base_url, None)
                return
            except Exception:
                self.problem = NO_KEYRING
        self._session[base_url] = key

    def delete(self, base_url: str) -> None:
        self._session.pop(base_url, None)
        if self._backend is not None:
            with contextlib.suppress(Exception):  # nothing stored under it
                self._backend.delete_password(SERVICE, base_url)
