"""Errors a client can cause, in OpenAI's shape: ``{"error": {"message", "type", "param", "code"}}``.

Every refusal is an ``ApiError`` with an HTTP status and a one-line message; the engine's
own typed errors map onto them in ``from_engine_error``, so a client reads the same
sentence the window would show.
"""

from __future__ import annotations

import enum
import json

from aiohttp import web

from engine import (
    SAMPLING_FIELDS,
    Cancelled,
    EngineError,
    ImageRejected,
    InvalidChatRequest,
    Overloaded,
    PromptTooLong,
)


class ErrorType(enum.StrEnum):
    """OpenAI's error ``type`` values."""

    INVALID_REQUEST = "invalid_request_error"
    AUTHENTICATION = "authentication_error"
    PERMISSION = "permission_error"
    NOT_FOUND = "not_found_error"
    RATE_LIMIT = "rate_limit_error"
    SERVER = "server_error"
    UNAVAILABLE = "unavailable_error"


class ApiError(Exception):
    """A request the server refuses, or could not serve. (Not a frozen dataclass: Python's
    exception machinery writes ``__traceback__`` on it.)"""

    def __init__(
        self,
        status: int,
        message: str,
        type: ErrorType = ErrorType.INVALID_REQUEST,  # OpenAI's field name
        param: str | None = None,
        code: str | None = None,
        retry_after: int | None = None,  # seconds, for 429 and 503
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
        self.retry_after = retry_after

    def __str__(self) -> str:
        return self.message

    def body(self) -> dict:
        error = {"message": self.message, "type": self.type.value, "param": self.param, "code": self.code}
        return {"error": error}

    def response(self) -> web.Response:
        headers = {"Retry-After": str(self.retry_after)} if self.retry_after is not None else None
        return web.Response(
            status=self.status,
            text=json.dumps(self.body()),
            content_type="application/json",
            headers=headers,
        )


def bad_request(message: str, param: str | None = None, code: str | None = None) -> ApiError:
    return ApiError(400, message, ErrorType.INVALID_REQUEST, param, code)


def server_stopping() -> ApiError:
    """A reply cut short because the server stops (a client must not take it as complete)."""
    return ApiError(
        503, "Hearth's server stopped before the reply was finished.", ErrorType.UNAVAILABLE,
        code="server_stopping", retry_after=5,
    )  # fmt: skip


def no_model() -> ApiError:
    return ApiError(
        503, "No model is loaded in Hearth: load one first.", ErrorType.UNAVAILABLE, code="model_not_loaded",
        retry_after=5,
    )  # fmt: skip


RETRY_AFTER_OVERLOADED = 1  # seconds: a sequence frees as soon as one reply ends


def _param(field: str | None) -> str | None:
    """The request field a ``SamplingParams`` field comes from (its OpenAI name)."""
    if field is None:
        return None
    if field == "grammar":
        return "response_format"
    if field == "logprobs":
        return "top_logprobs"
    spec = next((f for f in SAMPLING_FIELDS if f.name == field), None)
    return spec.openai if spec is not None else field


def from_engine_error(error: EngineError) -> ApiError:
    """What the client is told about an engine refusal or failure."""
    if isinstance(error, Overloaded):
        return ApiError(429, error.message, ErrorType.RATE_LIMIT, code="overloaded",
                        retry_after=RETRY_AFTER_OVERLOADED)  # fmt: skip
    if isinstance(error, PromptTooLong):
        return bad_request(error.message, "messages", "context_length_exceeded")
    if isinstance(error, ImageRejected):
        return bad_request(error.message, "messages", "invalid_image")
    if isinstance(error, InvalidChatRequest):
        return bad_request(error.message, _param(error.field))
    if isinstance(error, Cancelled):  # the model was unloaded (or replaced) under the request
        return ApiError(503, error.message, ErrorType.UNAVAILABLE, code="model_unloaded", retry_after=5)
    return ApiError(500, error.message, ErrorType.SERVER)
