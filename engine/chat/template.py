"""Rendering a conversation for one model: its Jinja template or a built-in format, media
markers placed, stop strings derived, whether the text already starts with BOS."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.chat.formats import (
    FORMAT_STOPS,
    PromptFormat,
    Turn,
    builtin_format,
    render_builtin,
    template_stop_strings,
)
from engine.chat.jinja_sandbox import TemplateError, render_jinja
from engine.chat.messages import ChatMessage
from engine.chat.tool_prompt import plain_tool_turns

DEFAULT_MEDIA_MARKER = "<__media__>"
"""What llama.cpp's mtmd looks for in the prompt text, one per image (``mtmd_default_marker``)."""

# A word joiner: invisible, keeps a user-typed media marker from being taken for an image slot.
_MARKER_BREAK = "\u2060"


class MediaPlacement(enum.Enum):
    """Where a message's media markers go relative to its text."""

    BEFORE_TEXT = "before"  # what llama.cpp's server and LM Studio do for attached images
    AFTER_TEXT = "after"


@dataclass(frozen=True)
class RenderedPrompt:
    """The prompt text and how to treat it.

    ``adds_bos``: the rendered text already begins with the BOS token's text (the template
    wrote it), so tokenization must not add another BOS: tokenize with
    ``add_special=self.add_special`` (i.e. False then) and ``parse_special=True``.
    """

    text: str
    stop_strings: tuple[str, ...]
    format_name: str
    adds_bos: bool
    image_count: int = 0

    @property
    def add_special(self) -> bool:
        """The ``add_special`` flag for ``llama_tokenize`` / ``mtmd_input_text``."""
        return not self.adds_bos


def _content(message: ChatMessage, marker: str, placement: MediaPlacement) -> str:
    text = message.text
    if marker:
        # A user who types the marker must not create an image slot: mtmd_tokenize would
        # then refuse the prompt for a marker/image count mismatch.
        text = text.replace(marker, marker[:1] + _MARKER_BREAK + marker[1:])
    markers = [marker] * len(message.images) if marker else []
    if not markers:
        return text
    # Joined with newlines as llama.cpp's server joins content parts into one string.
    parts = [*markers, text] if placement is MediaPlacement.BEFORE_TEXT else [text, *markers]
    return "\n".join(part for part in parts if part)


@dataclass(frozen=True)
class ChatTemplate:
    """How to render conversations for one model. Build once per loaded model."""

    template: str | None
    architecture: str
    bos_token: str = ""
    eos_token: str = ""
    media_marker: str = DEFAULT_MEDIA_MARKER
    media_placement: MediaPlacement = MediaPlacement.BEFORE_TEXT

    @property
    def format(self) -> PromptFormat:
        return PromptFormat.JINJA if self.template else builtin_format(self.architecture)

    @property
    def format_name(self) -> str:
        return self.format.value

    @property
    def renders_tools(self) -> bool:
        """Whether the template itself renders ``tools``, tool calls and tool results;
        otherwise ``render`` rewrites them into plain turns (``tool_prompt``)."""
        return bool(self.template) and "tools" in self.template  # type: ignore[operator]

    @property
    def stop_strings(self) -> tuple[str, ...]:
        if self.template:
            return template_stop_strings(self.template, self.eos_token)
        return FORMAT_STOPS[self.format]

    def render(
        self,
        messages: Iterable[ChatMessage],
        *,
        add_generation_prompt: bool = True,
        tools: Sequence[Mapping[str, Any]] = (),
    ) -> RenderedPrompt:
        messages = list(messages)
        turns = [
            Turn(
                m.role,
                _content(m, self.media_marker, self.media_placement),
                m.tool_calls,
                m.tool_call_id,
                m.name,
            )
            for m in messages
        ]
        image_count = sum(len(m.images) for m in messages)
        native_tools = self.renders_tools
        if not native_tools:
            turns = plain_tool_turns(turns, tools)
        if self.template:
            text = render_jinja(
                self.template,
                turns,
                bos_token=self.bos_token,
                eos_token=self.eos_token,
                add_generation_prompt=add_generation_prompt,
                tools=tools if native_tools else (),
            )
        else:
            text = render_builtin(self.format, turns, add_generation_prompt)
        if self.media_marker and text.count(self.media_marker) != image_count:
            # mtmd_tokenize needs exactly one marker per image; say so before it fails.
            raise TemplateError(
                f"The chat template placed {text.count(self.media_marker)} image slots "
                f"for {image_count} images."
            )
        return RenderedPrompt(
            text=text,
            stop_strings=self.stop_strings,
            format_name=self.format_name,
            adds_bos=bool(self.bos_token) and text.startswith(self.bos_token),
            image_count=image_count,
        )

    @classmethod
    def from_model(
        cls,
        model: Any,
        *,
        media_marker: str = DEFAULT_MEDIA_MARKER,
        media_placement: MediaPlacement = MediaPlacement.BEFORE_TEXT,
    ) -> ChatTemplate:
        """Read template, architecture and BOS/EOS text from a loaded ``llama_model*``."""
        import ctypes

        import llama_cpp

        raw = llama_cpp.llama_model_chat_template(model, None)
        template = raw.decode("utf-8", errors="replace") if raw else None

        buf = ctypes.create_string_buffer(128)
        n = llama_cpp.llama_model_meta_val_str(model, b"general.architecture", buf, len(buf))
        architecture = buf.value.decode("utf-8", errors="replace") if n >= 0 else ""

        vocab = llama_cpp.llama_model_get_vocab(model)

        def text_of(token: int) -> str:
            if token < 0:  # LLAMA_TOKEN_NULL: the vocabulary has no such token
                return ""
            raw_text = llama_cpp.llama_vocab_get_text(vocab, token)
            return raw_text.decode("utf-8", errors="replace") if raw_text else ""

        return cls(
            template=template,
            architecture=architecture,
            bos_token=text_of(llama_cpp.llama_vocab_bos(vocab)),
            eos_token=text_of(llama_cpp.llama_vocab_eos(vocab)),
            media_marker=media_marker,
            media_placement=media_placement,
        )


def render_prompt(
    messages: Iterable[ChatMessage],
    *,
    template: str | None,
    architecture: str,
    bos_token: str,
    eos_token: str,
    add_generation_prompt: bool = True,
    media_marker: str = DEFAULT_MEDIA_MARKER,
    media_placement: MediaPlacement = MediaPlacement.BEFORE_TEXT,
    tools: Sequence[Mapping[str, Any]] = (),
) -> RenderedPrompt:
    """Render ``messages`` with ``template`` (the GGUF's Jinja chat template) or, when
    there is none, with the built-in format for ``architecture``. Raises TemplateError."""
    chat = ChatTemplate(
        template=template or None,
        architecture=architecture,
        bos_token=bos_token,
        eos_token=eos_token,
        media_marker=media_marker,
        media_placement=media_placement,
    )
    return chat.render(messages, add_generation_prompt=add_generation_prompt, tools=tools)
