"""``host:port`` of an RPC worker, parsed and checked the way ggml-rpc's parse_endpoint reads it."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from engine.base.defaults import DEFAULT_WORKER_PORT
from engine.base.errors import EngineError

DEFAULT_PORT = DEFAULT_WORKER_PORT  # llama.cpp's rpc-server default


class InvalidAddress(EngineError, ValueError):
    """A worker address that is not ``host:port``."""


@dataclass(frozen=True)
class WorkerAddress:
    host: str
    port: int

    @property
    def endpoint(self) -> str:
        """What ggml-rpc takes: ``host:port`` (it splits at the last colon)."""
        return f"{self.host}:{self.port}"

    @property
    def is_loopback(self) -> bool:
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False

    def __str__(self) -> str:
        return self.endpoint


def parse_address(text: str, default_port: int = DEFAULT_PORT) -> WorkerAddress:
    """``"host:port"`` or ``"host"`` (the default port) as a ``WorkerAddress``.

    ggml-rpc aborts the process on an endpoint it cannot parse (rpc_dispatcher::start), so
    every address is checked here before it reaches llama.cpp.
    """
    raw = text.strip()
    if not raw:
        raise InvalidAddress("A worker address is host:port, e.g. 192.168.1.20:50052.")
    host, sep, port_text = raw.rpartition(":")
    if not sep:
        host, port_text = raw, str(default_port)
    host = host.strip("[]")  # ggml-rpc has no IPv6 brackets; IPv6 hosts are refused below
    if not host or any(c.isspace() for c in host) or ":" in host:
        raise InvalidAddress(f"{text!r} is not host:port (llama.cpp's RPC takes no IPv6 addresses).")
    try:
        port = int(port_text)
    except ValueError:
        raise InvalidAddress(f"{text!r}: the port {port_text!r} is not a number.") from None
    if not 1 <= port <= 65535:
        raise InvalidAddress(f"{text!r}: the port must be between 1 and 65535.")
    return WorkerAddress(host, port)
