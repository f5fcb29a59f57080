"""Remote OpenAI-compatible servers (llama-server, vLLM, Ollama, another Hearth) as models
the window chats with: ``RemoteEndpoint`` (address, key), ``list_models`` (GET /models),
``RemoteModel`` (a ``ChatModel`` streaming each reply on its own thread)."""

from engine.remote.endpoint import RemoteEndpoint, RemoteModelInfo, list_models, normalize_base_url
from engine.remote.errors import (
    RemoteBadUrl,
    RemoteError,
    RemoteInterrupted,
    RemoteRefused,
    RemoteUnauthorized,
    RemoteUnreachable,
)
from engine.remote.model import RemoteModel

__all__ = [
    "RemoteBadUrl",
    "RemoteEndpoint",
    "RemoteError",
    "RemoteInterrupted",
    "RemoteModel",
    "RemoteModelInfo",
    "RemoteRefused",
    "RemoteUnauthorized",
    "RemoteUnreachable",
    "list_models",
    "normalize_base_url",
]
