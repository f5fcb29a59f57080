"""A remote OpenAI-compatible server: its address and key, and the models it lists.

Blocking calls (``list_models``): run them off the GUI thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from engine.remote.errors import RemoteBadUrl, RemoteRefused, translate

CONNECT_TIMEOUT_S = 5.0
LIST_TIMEOUT_S = 10.0
# A long prompt on a slow server may take minutes before its first token.
READ_TIMEOUT_S = 300.0
NO_KEY = "none"  # the SDK insists on a key; servers without one ignore it


def normalize_base_url(text: str) -> str:
    """``http(s)://host[:port]/path`` without a trailing slash; ``/v1`` when no path is
    given (llama-server, vLLM, Ollama and Hearth all answer there); ``http://`` when no
    scheme is. Raises RemoteBadUrl with what is wrong."""
    raw = text.strip()
    if not raw:
        raise RemoteBadUrl("Enter the server's base URL, for example http://192.168.1.20:8080/v1.")
    candidate = raw if "://" in raw else f"http://{raw}"
    try:
        parts = urlsplit(candidate)
        port = parts.port  # raises on a port that is not a number in range
    except ValueError as exc:
        raise RemoteBadUrl(f"{raw} is not a valid address: {exc}.") from None
    if parts.scheme not in ("http", "https"):
        raise RemoteBadUrl(f"{raw} is not an http:// or https:// address.")
    if not parts.hostname or any(c.isspace() for c in raw):
        raise RemoteBadUrl(f"{raw} names no host.")
    if parts.query or parts.fragment:
        raise RemoteBadUrl(f"{raw}: a base URL has no ?query or #fragment.")
    del port
    path = parts.path.rstrip("/") or "/v1"
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


@dataclass(frozen=True)
class RemoteEndpoint:
    """Where a server is and the key it wants (never shown: ``repr`` leaves it out)."""

    base_url: str  # normalized
    api_key: str = field(default="", repr=False)
    name: str = ""  # what the user called it; the host when empty

    @property
    def where(self) -> str:
        """``host:port``, as messages name the server."""
        return urlsplit(self.base_url).netloc

    @property
    def title(self) -> str:
        return self.name or self.where

    def client(self, read_timeout: float = READ_TIMEOUT_S):  # -> openai.OpenAI
        """An SDK client for this server: no retries (a failure is shown, not hidden)."""
        import openai

        return openai.OpenAI(
            base_url=self.base_url,
            api_key=self.api_key or NO_KEY,
            max_retries=0,
            # The SDK's own Timeout: its HTTP library is httpx before 3.x and httpx2 after.
            timeout=openai.Timeout(read_timeout, connect=CONNECT_TIMEOUT_S),
        )


@dataclass(frozen=True)
class RemoteModelInfo:
    """One model a server lists under /v1/models."""

    endpoint: RemoteEndpoint
    model_id: str
    context_length: int = 0  # 0: the server does not say

    @property
    def key(self) -> tuple[str, str]:
        return (self.endpoint.base_url, self.model_id)


def _context_length(extra: dict[str, Any]) -> int:
    """Hearth and some servers report the context (``context_length``, llama-server's
    ``meta.n_ctx``, vLLM's ``max_model_len``); 0 when none does."""
    meta = extra.get("meta") if isinstance(extra.get("meta"), dict) else {}
    for value in (extra.get("context_length"), extra.get("max_model_len"), meta.get("n_ctx")):
        if isinstance(value, int) and value > 0:
            return value
    return 0


def list_models(endpoint: RemoteEndpoint, timeout: float = LIST_TIMEOUT_S) -> tuple[RemoteModelInfo, ...]:
    """GET /models (blocking). Raises a RemoteError saying why not."""
    try:
        page = endpoint.client(read_timeout=timeout).models.list()
        models = []
        for model in page.data:
            extra = dict(model.model_extra or {})
            models.append(RemoteModelInfo(endpoint, str(model.id), _context_length(extra)))
    except Exception as exc:
        raise translate(exc, endpoint.where, timeout) from None
    if not all(m.model_id for m in models):
        raise RemoteRefused(f"{endpoint.where} listed a model without an id.")
    return tuple(sorted(models, key=lambda m: m.model_id.lower()))
