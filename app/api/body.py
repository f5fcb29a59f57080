"""Reading a request body as one JSON object, or a 400/413 that says what is wrong with it."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web

from app.api.errors import ApiError, bad_request
from engine import format_bytes

# Bodies larger than this are parsed on a worker thread: json.loads of 20 MB takes long
# enough to stall the window, whose event loop serves the API.
LARGE_BODY = 256 * 1024


def too_large(limit: int) -> ApiError:
    return ApiError(413, f"The request body is larger than {format_bytes(limit)}.", code="request_too_large")


async def read_json(request: web.Request, limit: int) -> tuple[dict[str, Any], int]:
    """The body as a JSON object, and its size in bytes."""
    if request.content_length is not None and request.content_length > limit:
        raise too_large(limit)
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise too_large(limit) from None
    if not raw.strip():
        raise bad_request("The request body is empty: send a JSON object.")
    body = await asyncio.to_thread(parse_json, raw) if len(raw) > LARGE_BODY else parse_json(raw)
    return body, len(raw)


def parse_json(raw: bytes) -> dict[str, Any]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise bad_request("The request body is not UTF-8 text.") from None
    try:
        body = json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}, column {exc.colno}"
        raise bad_request(f"The request body is not valid JSON: {exc.msg} ({where}).") from None
    except RecursionError:
        raise bad_request("The request body is nested too deeply.") from None
    except ValueError as exc:  # e.g. an integer with more digits than Python converts
        raise bad_request(f"The request body is not valid JSON: {str(exc).splitlines()[0][:120]}") from None
    if not isinstance(body, dict):
        raise bad_request("The request body must be a JSON object.")
    return body
