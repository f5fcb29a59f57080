"""The remote servers the user added (Settings → Remote servers) and the models each lists.

The list is a setting in the store (base URL and name only); each server's API key is in
the ``KeyVault``. The keyring (which may wait on D-Bus or an unlock prompt) and listing
(GET /v1/models) are used on a worker thread; answers come back as a signal in the GUI
thread, so neither a slow keyring nor an unreachable server blocks the window.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from PySide6.QtCore import QObject, Signal

from app.settings.key_vault import KeyVault
from app.state.remote import ListingState, RemoteServer, ServerListing
from app.store.history import Store
from engine import (
    EngineError,
    RemoteEndpoint,
    RemoteError,
    list_models,
    normalize_base_url,
)

SERVERS_KEY = "remote.servers"


class RemoteServers(QObject):
    changed = Signal()  # servers added or removed, or a listing answered
    _listed = Signal(str, int, object)  # base URL, generation, models or RemoteError

    def __init__(self, store: Store, keys: KeyVault, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.store = store
        self.keys = keys
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="hearth-remote")
        self._generation = 0  # answers to an older refresh of a server are dropped
        self._asked: dict[str, int] = {}
        saved = store.get_setting(SERVERS_KEY, []) or []
        self._servers = [RemoteServer(s["base_url"], s.get("name", "")) for s in saved if s.get("base_url")]
        self._listings = {s.base_url: ServerListing(s, ListingState.CHECKING) for s in self._servers}
        self._listed.connect(self._on_listed)
        self._shut_down = False

    # -- reading -----------------------------------------------------------------------------

    def servers(self) -> tuple[RemoteServer, ...]:
        return tuple(self._servers)

    def listings(self) -> tuple[ServerListing, ...]:
        return tuple(self._listings[s.base_url] for s in self._servers)

    def listing(self, base_url: str) -> ServerListing | None:
        return self._listings.get(base_url)

    def endpoint(self, server: RemoteServer) -> RemoteEndpoint:
        return RemoteEndpoint(server.base_url, self.keys.get(server.base_url), server.name)

    # -- changing ----------------------------------------------------------------------------

    def add(self, url: str, api_key: str = "", name: str = "") -> RemoteServer:
        """Remember a server (its key in the keyring) and list its models. Raises
        RemoteBadUrl for an address that is not one; adding a known URL again updates it."""
        server = RemoteServer(normalize_base_url(url), name.strip())
        self._servers = [s for s in self._servers if s.base_url != server.base_url] + [server]
        self._save()
        self.refresh(server.base_url, new_key=api_key.strip())
        return server

    def remove(self, base_url: str) -> None:
        self._servers = [s for s in self._servers if s.base_url != base_url]
        self._listings.pop(base_url, None)
        self._asked.pop(base_url, None)  # a listing still on its way is dropped
        if not self._shut_down:
            self._pool.submit(self.keys.delete, base_url)
        self._save()
        self.changed.emit()

    def refresh(self, base_url: str | None = None, new_key: str | None = None) -> None:
        """List the models of one server (or of all) again, in the background; ``new_key``:
        keep this key for it first (in the keyring, or for the session)."""
        if self._shut_down:
            return
        for server in self._servers:
            if base_url is not None and server.base_url != base_url:
                continue
            self._generation += 1
            generation = self._asked[server.base_url] = self._generation
            self._listings[server.base_url] = ServerListing(server, ListingState.CHECKING)
            self._pool.submit(self._list, server, generation, new_key)
        self.changed.emit()

    def shutdown(self) -> None:
        self._shut_down = True
        self._pool.shutdown(wait=False, cancel_futures=True)

    # -- the worker ----------------------------------------------------------------------------

    def _list(self, server: RemoteServer, generation: int, new_key: str | None) -> None:
        if new_key is not None:
            self.keys.set(server.base_url, new_key)
        endpoint = self.endpoint(server)
        try:
            answer: object = list_models(endpoint)
        except EngineError as exc:
            answer = exc
        except Exception as exc:  # whatever it was, the server shows offline with it
            answer = RemoteError(f"{endpoint.where}: {exc}")
        if not self._shut_down:
            self._listed.emit(endpoint.base_url, generation, answer)

    def _on_listed(self, base_url: str, generation: int, answer: object) -> None:
        server = next((s for s in self._servers if s.base_url == base_url), None)
        if server is None or self._asked.get(base_url) != generation:
            return
        if isinstance(answer, EngineError):
            listing = ServerListing(server, ListingState.OFFLINE, error=answer.message)
        else:
            listing = ServerListing(server, ListingState.ONLINE, tuple(answer))  # type: ignore[arg-type]
        self._listings[base_url] = listing
        self.changed.emit()

    def _save(self) -> None:
        self.store.set_setting(SERVERS_KEY, [{"base_url": s.base_url, "name": s.name} for s in self._servers])
