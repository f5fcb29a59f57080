"""What the window knows of the remote servers (``app.services.remote_servers``): a server as
saved, and its listing (checking, online with its models, offline and why)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from engine import RemoteEndpoint, RemoteModelInfo


class ListingState(enum.Enum):
    CHECKING = "checking"
    ONLINE = "online"
    OFFLINE = "offline"


@dataclass(frozen=True)
class RemoteServer:
    """A server as saved: no key here (it is in the keyring)."""

    base_url: str
    name: str = ""


@dataclass(frozen=True)
class ServerListing:
    """What the window knows about a server now."""

    server: RemoteServer
    state: ListingState
    models: tuple[RemoteModelInfo, ...] = ()
    error: str = ""

    @property
    def title(self) -> str:
        return self.server.name or RemoteEndpoint(self.server.base_url).where

    def status_text(self) -> str:
        if self.state is ListingState.CHECKING:
            return "checking…"
        if self.state is ListingState.OFFLINE:
            return f"offline: {self.error}"
        count = len(self.models)
        return f"{count} model{'s' * (count != 1)}"
