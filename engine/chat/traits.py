"""What a model's chat template does about tools and thinking, read once at load.

Pure: imports neither llama.cpp nor Qt (templates render in the Jinja sandbox).
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.chat.jinja_sandbox import TemplateError
from engine.chat.messages import ChatMessage, Role
from engine.chat.reasoning import ReasoningSplitter
from engine.chat.template import ChatTemplate
from engine.chat.tool_calls import ToolCallFormat
from engine.sampling.grammar import Grammar

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


@dataclass(frozen=True)
class ChatTraits:
    """``tool_format``: how the model writes tool calls when tools are offered (for a
    template that cannot render tools, the Hermes format the fallback prompt asks for).
    ``opens_thinking``: the generation prompt already opens ``<think>``, so the output
    starts inside the reasoning. ``thinks``: the template or model uses ``<think>`` at all.
    ``renders_tools``: the template renders tools itself (else the fallback prompt does)."""

    tool_format: ToolCallFormat = ToolCallFormat.HERMES
    opens_thinking: bool = False
    thinks: bool = False
    renders_tools: bool = False

    def reasoning_splitter(self) -> ReasoningSplitter:
        """A splitter for one reply of this model."""
        return ReasoningSplitter(
            starts_inside=self.opens_thinking, open_tag=THINK_OPEN, close_tag=THINK_CLOSE
        )

    def constrain(self, grammar: Grammar) -> Grammar:
        """``grammar`` for a reply of this model: a thinking model's grammar starts after
        its reasoning (lazily, at ``</think>``), so the thinking itself is free."""
        if self.thinks and not grammar.lazy:
            return grammar.after(THINK_CLOSE)
        return grammar


def tool_format_of(template: str | None) -> ToolCallFormat:
    """The tool-call format a Jinja template teaches, from the markers it spells."""
    if not template or "tools" not in template:
        return ToolCallFormat.HERMES  # the fallback prompt's format
    if "<tool_call>" in template:
        return ToolCallFormat.HERMES
    if "[TOOL_CALLS]" in template:
        return ToolCallFormat.MISTRAL
    if "<|python_tag|>" in template or ("<|eot_id|>" in template and "parameters" in template):
        return ToolCallFormat.LLAMA3_JSON
    return ToolCallFormat.GENERIC


def generation_prompt(template: ChatTemplate) -> str:
    """What the template adds for the assistant's turn to begin ("" when it cannot say)."""
    messages = [ChatMessage(Role.USER, "Hi")]
    try:
        without = template.render(messages, add_generation_prompt=False).text
        with_prompt = template.render(messages, add_generation_prompt=True).text
    except TemplateError:
        return ""
    return with_prompt[len(without) :] if with_prompt.startswith(without) else ""


def chat_traits(template: ChatTemplate) -> ChatTraits:
    """The traits of a model rendered with ``template``."""
    text = template.template or ""
    opens = generation_prompt(template).rstrip().endswith(THINK_OPEN)
    return ChatTraits(
        tool_format=tool_format_of(template.template),
        opens_thinking=opens,
        thinks=opens or THINK_OPEN in text or THINK_CLOSE in text,
        renders_tools=template.renders_tools,
    )
