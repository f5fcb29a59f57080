"""API keys of remote servers: in the system keyring (``keyring``: Secret Service, KWallet,
macOS Keychain, Windows Credential Locker), never in Hearth's own files.

Where no keyring backend works (a bare desktop, a container), keys are kept in memory for
this session only, and ``problem`` says so in one line for the settings to show.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
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
    """``get``/``set``/``delete`` a server's key; falls back to memory where the keyring fails.

    Thread-safe: the remote servers use it from their worker thread.
    """

    def __init__(
        self,
        backend: KeyringBackend | None = None,
        problem: str = "",
        find: Callable[[], tuple[KeyringBackend | None, str]] | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._find = find  # looks for the system keyring when first needed
        self._backend = backend
        self._problem = problem if backend is not None or problem or find else NO_KEYRING
        self._session: dict[str, str] = {}  # keys the keyring could not take

    @classmethod
    def system(cls) -> KeyVault:
        """The system keyring, looked for on first use (on Linux that asks D-Bus, which the
        window's start should not wait for)."""
        return cls(find=system_keyring)

    def _resolved(self) -> KeyringBackend | None:
        with self._lock:
            if self._find is not None:
                self._backend, self._problem = self._find()
                self._find = None
            return self._backend

    @property
    def problem(self) -> str:
        """Why keys are kept for this session only ("" when they go to the keyring)."""
        self._resolved()
        return self._problem

    @property
    def persistent(self) -> bool:
        return self._resolved() is not None and not self._problem

    def get(self, base_url: str) -> str:
        backend = self._resolved()
        with self._lock:
            if base_url in self._session:
                return self._session[base_url]
        if backend is None:
            return ""
        try:
            return backend.get_password(SERVICE, base_url) or ""
        except Exception:  # a locked or broken keyring reads as no key; the server says 401
            return ""

    def set(self, base_url: str, key: str) -> None:
        if not key:
            self.delete(base_url)
            return
        backend = self._resolved()
        if backend is not None:
            try:
                backend.set_password(SERVICE, base_url, key)
                with self._lock:
                    self._session.pop(base_url, None)
                return
            except Exception:
                self._problem = NO_KEYRING
        with self._lock:
            self._session[base_url] = key

    def delete(self, base_url: str) -> None:
        backend = self._resolved()
        with self._lock:
            self._session.pop(base_url, None)
        if backend is not None:
            with contextlib.suppress(Exception):  # nothing stored under it
                backend.delete_password(SERVICE, base_url)
