"""What callers hand the engine: ``ChatRequest``, the checks of its tools, and its limits (``PromptSize``)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.base.defaults import DEFAULT_MAX_TOKENS
from engine.base.errors import EngineError, InvalidChatRequest
from engine.chat import ChatMessage, Role, clean_text
from engine.chat.messages import MAX_TOOL_NAME
from engine.sampling.params import SamplingParams


class PromptTooLong(EngineError):
    """The prompt does not fit the context of one conversation."""


@dataclass(frozen=True)
class PromptSize:
    """How much of a conversation's context a request's prompt takes, before it is sent."""

    tokens: int  # context positions the prompt takes (text tokens, image positions)
    limit: int  # positions one conversation holds with this load

    @property
    def fits(self) -> bool:
        return self.tokens <= self.limit


_request_ids = itertools.count(1)

MAX_TOOLS = 128
MAX_TOOLS_CHARS = 256 * 1024  # the tools' JSON, all together
# Text leaves the engine at most ~30 times a second per request: often enough to read as
# a stream, rarely enough that the window repaints and an HTTP client receives chunks of
# several tokens.
DEFAULT_TEXT_INTERVAL_S = 1.0 / 30.0
MAX_TEXT_INTERVAL_S = 1.0  # text held longer would not read as a stream


def check_tools(tools: tuple[Any, ...]) -> None:
    """OpenAI function tools: ``{"type": "function", "function": {"name", "description",
    "parameters"}}``, JSON all the way down, names unique."""
    if len(tools) > MAX_TOOLS:
        raise InvalidChatRequest(f"A request may offer at most {MAX_TOOLS} tools, not {len(tools)}.")
    names: set[str] = set()
    for index, tool in enumerate(tools):
        where = f"Tool {index + 1}"
        if not isinstance(tool, Mapping) or tool.get("type", "function") != "function":
            raise InvalidChatRequest(f'{where} must be {{"type": "function", "function": {{...}}}}.')
        function = tool.get("function")
        if not isinstance(function, Mapping):
            raise InvalidChatRequest(f"{where} has no function object.")
        name = function.get("name")
        if not isinstance(name, str) or not 1 <= len(name) <= MAX_TOOL_NAME:
            raise InvalidChatRequest(f"{where} needs a function name of 1 to {MAX_TOOL_NAME} characters.")
        if name in names:
            raise InvalidChatRequest(f"Two tools are called {name!r}.")
        names.add(name)
        description = function.get("description", "")
        if not isinstance(description, str):
            raise InvalidChatRequest(f"The description of tool {name!r} must be text.")
        parameters = function.get("parameters", {})
        if not isinstance(parameters, Mapping):
            raise InvalidChatRequest(f"The parameters of tool {name!r} must be a JSON schema object.")
    try:
        size = len(json.dumps(list(tools), allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise InvalidChatRequest(f"The tools are not JSON: {exc}.") from None
    if size > MAX_TOOLS_CHARS:
        raise InvalidChatRequest(f"The tools take more than {MAX_TOOLS_CHARS // 1024} KiB of JSON.")


@dataclass(frozen=True)
class ChatRequest:
    """One reply to generate: from chat ``messages`` (rendered with the model's template)
    or from a raw ``prompt`` text (base models, benchmarks)."""

    messages: tuple[ChatMessage, ...] = ()
    prompt: str | None = None
    sampling: SamplingParams = SamplingParams()  # noqa: RUF009 - a frozen value, safe to share
    max_tokens: int = DEFAULT_MAX_TOKENS
    stop: tuple[str, ...] = ()
    cache: bool = True  # reuse and keep a cached prompt prefix
    ignore_eos: bool = False  # benchmarks: keep generating through end-of-generation tokens
    speculate: bool | None = None  # None: as the model was loaded; False: never for this request
    # Continue an interrupted reply: the model's turn starts with this text already said.
    assistant_prefix: str = ""
    owner: str = ""  # who asked (a conversation id): shown in stats
    # OpenAI function-tool specs, rendered by the model's chat template (or, for a template
    # without tool support, described in a system prompt): see engine.chat.tool_prompt.
    tools: tuple[dict[str, Any], ...] = ()
    # The shortest time between two text deltas; None: DEFAULT_TEXT_INTERVAL_S.
    # The window asks for fewer: every delta wakes the GUI thread, which on two cores takes
    # its time from llama.cpp's threads, and it shows text only a few times a second.
    text_interval_s: float | None = None
    request_id: int = field(default_factory=lambda: next(_request_ids))

    def __post_init__(self) -> None:
        object.__setattr__(self, "messages", tuple(self.messages))
        object.__setattr__(self, "tools", tuple(self.tools))
        if self.prompt is not None:
            object.__setattr__(self, "prompt", clean_text(self.prompt, "The prompt"))
        object.__setattr__(self, "assistant_prefix", clean_text(self.assistant_prefix, "The reply prefix"))
        object.__setattr__(self, "stop", tuple(clean_text(s, "A stop string") for s in self.stop))
        object.__setattr__(self, "owner", clean_text(self.owner, "The owner"))

    def text_interval(self, default: float = DEFAULT_TEXT_INTERVAL_S) -> float:
        """The shortest time between two of this request's text deltas."""
        return default if self.text_interval_s is None else self.text_interval_s

    def validate(self) -> None:
        if not self.messages and self.prompt is None:
            raise InvalidChatRequest("A request needs messages or a prompt.")
        if self.max_tokens < 1:
            raise InvalidChatRequest(f"Max tokens must be at least 1, not {self.max_tokens}.")
        if self.text_interval_s is not None and not 0.0 <= self.text_interval_s <= MAX_TEXT_INTERVAL_S:
            raise InvalidChatRequest(
                f"The text interval must be 0–{MAX_TEXT_INTERVAL_S:g} s, not {self.text_interval_s:g}."
            )
        if self.tools:
            if self.prompt is not None:
                raise InvalidChatRequest("Tools need chat messages, not a raw prompt.")
            try:
                check_tools(self.tools)
            except InvalidChatRequest as exc:  # named, so the API's 400 says which field
                raise InvalidChatRequest(exc.message, field="tools") from None
        if any(m.role is Role.TOOL and not m.tool_call_id and not m.name for m in self.messages):
            raise InvalidChatRequest("A tool message must say which call it answers (tool_call_id).")
        self.sampling.validate()
