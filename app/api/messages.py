"""OpenAI chat messages → the engine's ``ChatMessage``s.

``content`` may be a string or an array of content parts (``text``, ``image_url``). Images
come only inline, as ``data:`` URIs: Hearth never fetches from the network. They are
checked and decoded exactly as the window does it (``check_message_images``, then
``load_image`` each), so a picture the window refuses is refused here with the same
sentence. Decoding is CPU work: callers run ``parse_messages`` off the event loop when
the body is large.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.api.errors import bad_request
from app.api.fields import wrong_type
from engine import ChatMessage, EngineError, ImageRejected, ToolCall, check_message_images, load_image

# The roles a client may send, and the engine's role for each ("developer" is OpenAI's newer
# name for the system prompt).
ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool"}
_ROLE_LIST = "system, developer, user, assistant, tool"

ReplyTokens = Callable[[str], tuple[tuple[int, ...], str] | None]
"""Looks up a reply this server generated, by its exact text: (token ids, model identity)."""


@dataclass(frozen=True)
class ParsedMessages:
    messages: tuple[ChatMessage, ...]
    # The conversation ends with an assistant message: the reply continues it (llama-server's
    # "prefill"), and that text is the reply's beginning rather than a turn of its own.
    assistant_prefix: str = ""
    images: int = 0


def parse_messages(
    value: object, *, has_vision: bool, model_name: str, reply_tokens: ReplyTokens | None = None
) -> ParsedMessages:
    if not isinstance(value, list):
        raise wrong_type("messages", "an array of messages", value)
    if not value:
        raise bad_request("'messages' must hold at least one message.", "messages")
    messages: list[ChatMessage] = []
    images = 0
    for i, item in enumerate(value):
        param = f"messages[{i}]"
        if not isinstance(item, dict):
            raise wrong_type(param, "an object", item)
        message = _message(item, param, has_vision, model_name)
        if message.role.value == "assistant" and reply_tokens is not None and message.text:
            known = reply_tokens(message.text)
            if known is not None:  # this server wrote it: its own ids keep the cache exact
                message = ChatMessage("assistant", message.text, tokens=known[0], tokens_model=known[1])
        images += len(message.images)
        messages.append(message)
    prefix = ""
    if len(messages) > 1 and messages[-1].role.value == "assistant":
        prefix = messages.pop().text
    return ParsedMessages(tuple(messages), prefix, images)


def _message(item: dict[str, Any], param: str, has_vision: bool, model_name: str) -> ChatMessage:
    role = item.get("role")
    if not isinstance(role, str):
        raise bad_request(f"'{param}.role' must be one of {_ROLE_LIST}.", f"{param}.role")
    if role == "function":
        raise bad_request(
            f"'{param}': role 'function' is OpenAI's retired name for tool results: use role 'tool'.",
            f"{param}.role",
        )
    if role not in ROLES:
        raise bad_request(f"Unknown role '{role[:40]}' in {param}: use {_ROLE_LIST}.", f"{param}.role")
    if item.get("function_call"):
        raise bad_request(f"'{param}.function_call' is retired: send 'tool_calls'.", f"{param}.function_call")
    calls = _tool_calls(item.get("tool_calls"), f"{param}.tool_calls", role)
    text, sources = _content(item.get("content"), f"{param}.content", role)
    if sources and not has_vision:
        raise bad_request(
            f"{model_name} has no vision projector (the mmproj file that lets a model see): it "
            "cannot read images. Load it with one.",
            f"{param}.content",
            "model_not_multimodal",
        )
    images = _decode_images(sources, param) if sources else ()
    extra: dict[str, Any] = {}
    if role == "tool":
        call_id = item.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            raise bad_request(
                f"'{param}.tool_call_id' must name the call this result answers.", f"{param}.tool_call_id"
            )
        extra["tool_call_id"] = call_id
    name = item.get("name")
    if name is not None and not isinstance(name, str):
        raise wrong_type(f"{param}.name", "a string", name)
    if role == "tool" and name:
        extra["name"] = name  # the function's name: some templates print it
    try:
        return ChatMessage(ROLES[role], text, images=images, tool_calls=calls, **extra)
    except EngineError as exc:
        raise bad_request(exc.message, param) from exc


def _tool_calls(value: object, param: str, role: str) -> tuple[ToolCall, ...]:
    """An assistant message's calls: ``[{"id", "type": "function", "function": {"name", "arguments"}}]``."""
    if value is None or value == []:
        return ()
    if role != "assistant":
        raise bad_request(f"'{param}': only assistant messages carry tool calls.", param)
    if not isinstance(value, list):
        raise wrong_type(param, "an array of tool calls", value)
    calls = []
    for i, call in enumerate(value):
        where = f"{param}[{i}]"
        if not isinstance(call, dict):
            raise wrong_type(where, "an object", call)
        if call.get("type", "function") != "function":
            raise bad_request(f"'{where}.type' must be 'function'.", f"{where}.type")
        function = call.get("function")
        if not isinstance(function, dict):
            raise wrong_type(f"{where}.function", "an object", function)
        name, arguments, call_id = function.get("name"), function.get("arguments", "{}"), call.get("id", "")
        if not isinstance(name, str) or not name:
            raise bad_request(
                f"'{where}.function.name' must be the function's name.", f"{where}.function.name"
            )
        if isinstance(arguments, dict):  # an object where OpenAI sends its JSON text: the same call
            arguments = json.dumps(arguments, ensure_ascii=False)
        if not isinstance(arguments, str):
            raise wrong_type(f"{where}.function.arguments", "a JSON string", arguments)
        if not isinstance(call_id, str):
            raise wrong_type(f"{where}.id", "a string", call_id)
        try:
            calls.append(ToolCall(call_id, name, arguments))
        except EngineError as exc:
            raise bad_request(exc.message, where) from exc
    return tuple(calls)


def _content(content: object, param: str, role: str) -> tuple[str, list[tuple[str, str]]]:
    """The message's text and its images as (data URI, param) pairs."""
    if content is None:
        if role == "assistant":  # with tool calls, or an empty turn
            return "", []
        raise bad_request(f"'{param}' is required for a {role} message.", param)
    if isinstance(content, str):
        return content, []
    if not isinstance(content, list):
        raise wrong_type(param, "a string or an array of content parts", content)
    texts: list[str] = []
    sources: list[tuple[str, str]] = []
    for j, part in enumerate(content):
        part_param = f"{param}[{j}]"
        if not isinstance(part, dict):
            raise wrong_type(part_param, "an object", part)
        kind = part.get("type")
        if kind == "text":
            text = part.get("text")
            if not isinstance(text, str):
                raise wrong_type(f"{part_param}.text", "a string", text)
            texts.append(text)
        elif kind == "image_url":
            if role != "user":
                raise bad_request(f"'{part_param}': only user messages can carry images.", part_param)
            sources.append((_image_url(part.get("image_url"), f"{part_param}.image_url"), part_param))
        elif kind == "refusal" and role == "assistant":
            pass  # the text of an earlier refusal: nothing the model needs to read again
        else:
            shown = kind if isinstance(kind, str) else _kind_name(kind)
            raise bad_request(
                f"'{part_param}.type' is '{shown[:40]}': Hearth reads 'text' and 'image_url' parts.",
                f"{part_param}.type",
            )
    return "\n".join(texts), sources


def _kind_name(value: object) -> str:
    return "missing" if value is None else type(value).__name__


def _image_url(value: object, param: str) -> str:
    url = value.get("url") if isinstance(value, dict) else value
    if not isinstance(url, str):
        raise wrong_type(f"{param}.url", "a string", url)
    if not url.startswith("data:"):
        scheme = url.split(":", 1)[0][:16] if ":" in url else "a path"
        raise bad_request(
            f"'{param}.url' is a {scheme} URL: Hearth never fetches from the network; "
            "send the image inline as a data: URI (data:image/png;base64,...).",
            f"{param}.url",
            "remote_image_refused",
        )
    return url


def _decode_images(sources: list[tuple[str, str]], param: str) -> tuple[Any, ...]:
    try:
        check_message_images(sources)
        images = []
        for n, (uri, _part_param) in enumerate(sources, 1):
            name = f"Image {n} of {param}" if len(sources) > 1 else f"The image in {param}"
            images.append(load_image(_data_uri_bytes(uri, name), name=name))
        return tuple(images)
    except ImageRejected as exc:
        raise bad_request(exc.message, param, "invalid_image") from exc


def _data_uri_bytes(uri: str, name: str) -> bytes:
    header, sep, data = uri.partition(",")
    if not sep or ";base64" not in header.lower():
        raise ImageRejected(f"{name} is not a base64 data: URI (data:image/png;base64,...).")
    try:
        return base64.b64decode(data)  # not validate=True: wrapped (multi-line) base64 is fine
    except (binascii.Error, ValueError) as exc:
        raise ImageRejected(f"{name} is not valid base64.") from exc


__all__ = ["ParsedMessages", "ReplyTokens", "parse_messages"]
