"""Server-sent events as OpenAI streams them: ``data: {json}`` blocks, then ``data: [DONE]``."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

DONE = b"data: [DONE]\n\n"


def encode(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"


class EventStream:
    """One streaming response. ``send`` waits only while the client's socket is full, which
    holds back this response alone (the engine keeps decoding; its events queue)."""

    def __init__(self, request: web.Request, headers: dict[str, str] | None = None) -> None:
        self._request = request
        self.response = web.StreamResponse(
            status=200,
            headers={
                "Content-Type": "text/event-stream; charset=utf-8",
                "Cache-Control": "no-cache",
                "X-Accel-Buffering": "no",
                **(headers or {}),
            },
        )

    async def open(self) -> None:
        await self.response.prepare(self._request)

    async def send(self, payload: dict[str, Any]) -> None:
        await self.response.write(encode(payload))

    async def close(self) -> None:
        await self.response.write(DONE)
        await self.response.write_eof()
