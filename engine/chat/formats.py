"""Prompt formats: the built-in ones for models without a chat template, the end-of-turn
markers that become stop strings, and the reshaping of turns (system prompt folded into the
first user turn, same-role runs joined) that formats and template fallbacks share."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from engine.chat.messages import Role, ToolCall


class PromptFormat(enum.StrEnum):
    """How a prompt was rendered (``RenderedPrompt.format_name``)."""

    JINJA = "jinja"  # the GGUF's own chat template
    GEMMA = "gemma"
    CHATML = "chatml"
    PHI3 = "phi3"
    MISTRAL = "mistral"
    PLAIN = "plain"


# End-of-turn markers of common template families. A Jinja template that contains one
# of these literally gets it as a stop string: models sometimes spell the marker out as
# ordinary text pieces, which the end-of-generation token check cannot see.
KNOWN_END_MARKERS: tuple[str, ...] = (
    "<|im_end|>",
    "<end_of_turn>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|end|>",
    "</s>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<|END_OF_TURN_TOKEN|>",
    "<end_of_utterance>",
    "<|return|>",
    "<｜end▁of▁sentence｜>",
)

FORMAT_STOPS: dict[PromptFormat, tuple[str, ...]] = {
    PromptFormat.GEMMA: ("<end_of_turn>",),
    PromptFormat.CHATML: ("<|im_end|>",),
    PromptFormat.PHI3: ("<|end|>",),
    PromptFormat.MISTRAL: ("</s>", "[INST]"),
    PromptFormat.PLAIN: ("\nUser:",),
}

# general.architecture -> built-in format for models without a template. "llama" covers
# many unrelated fine-tunes; ChatML is the most common format among them.
_ARCH_FORMATS: dict[str, PromptFormat] = {
    "llama": PromptFormat.CHATML,
    "phi3": PromptFormat.PHI3,
    "phimoe": PromptFormat.PHI3,
}
_ARCH_PREFIX_FORMATS: tuple[tuple[str, PromptFormat], ...] = (
    ("gemma", PromptFormat.GEMMA),  # gemma, gemma2, gemma3, gemma3n, gemma-embedding
    ("qwen", PromptFormat.CHATML),  # qwen2, qwen2moe, qwen2vl, qwen3, qwen3moe...
    ("mistral", PromptFormat.MISTRAL),
)


def builtin_format(architecture: str) -> PromptFormat:
    """The format used for a model of ``architecture`` that has no chat template."""
    arch = architecture.strip().lower()
    if arch in _ARCH_FORMATS:
        return _ARCH_FORMATS[arch]
    for prefix, fmt in _ARCH_PREFIX_FORMATS:
        if arch.startswith(prefix):
            return fmt
    return PromptFormat.PLAIN


def template_stop_strings(template: str, eos_token: str = "") -> tuple[str, ...]:
    """Known end-of-turn markers written literally in ``template``, plus the EOS text when
    the template refers to ``eos_token`` (templates that end turns with it)."""
    stops = [marker for marker in KNOWN_END_MARKERS if marker in template]
    if eos_token and "eos_token" in template and eos_token not in stops:
        stops.append(eos_token)
    return tuple(stops)


# --------------------------------------------------------------------------- turns


@dataclass(frozen=True)
class Turn:
    """A message with its media markers already placed in the content."""

    role: Role
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str = ""
    name: str = ""

    def as_template_message(self) -> dict[str, Any]:
        """The message as chat templates expect it (transformers' and llama.cpp's shape):
        tool calls in OpenAI's form with their arguments as JSON values."""
        message: dict[str, Any] = {"role": self.role.value, "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.parsed_arguments()},
                }
                for call in self.tool_calls
            ]
        if self.tool_call_id:
            message["tool_call_id"] = self.tool_call_id
        if self.name:
            message["name"] = self.name
        return message


def merge_system(turns: Sequence[Turn]) -> list[Turn]:
    """Fold every system message into the first user message (``system\\n\\nuser``), as
    llama.cpp does for formats without a system role. With no user message at all, the
    system text becomes one, first."""
    system = "\n\n".join(t.content for t in turns if t.role is Role.SYSTEM and t.content)
    rest = [t for t in turns if t.role is not Role.SYSTEM]
    if not system:
        return rest
    for i, turn in enumerate(rest):
        if turn.role is Role.USER:
            # Whitespace at the join is never meant: it would only sit between the two.
            merged = f"{system.rstrip()}\n\n{turn.content.lstrip()}" if turn.content else system
            rest[i] = replace(turn, content=merged)
            return rest
    return [Turn(Role.USER, system), *rest]


def merge_consecutive(turns: Sequence[Turn]) -> list[Turn]:
    """Join runs of same-role messages (e.g. two user messages after a failed reply) for
    templates that insist roles alternate. Tool calls and tool results keep their own turns."""
    out: list[Turn] = []
    for turn in turns:
        joinable = not (turn.tool_calls or turn.role is Role.TOOL or (out and out[-1].tool_calls))
        if out and out[-1].role is turn.role and joinable:
            out[-1] = replace(out[-1], content=f"{out[-1].content}\n\n{turn.content}")
        else:
            out.append(turn)
    return out


# --------------------------------------------------------------------------- built-in formats


def render_builtin(fmt: PromptFormat, turns: Sequence[Turn], add_generation_prompt: bool) -> str:
    # None of these write BOS: the tokenizer adds it (RenderedPrompt.adds_bos is False).
    parts: list[str] = []
    if fmt is PromptFormat.GEMMA:
        # Gemma has no system role; llama.cpp's built-in "gemma" template also trims.
        for t in merge_system(turns):
            role = "model" if t.role is Role.ASSISTANT else "user"
            parts.append(f"<start_of_turn>{role}\n{t.content.strip()}<end_of_turn>\n")
        if add_generation_prompt:
            parts.append("<start_of_turn>model\n")
    elif fmt is PromptFormat.CHATML:
        for t in turns:
            parts.append(f"<|im_start|>{t.role.value}\n{t.content}<|im_end|>\n")
        if add_generation_prompt:
            parts.append("<|im_start|>assistant\n")
    elif fmt is PromptFormat.PHI3:
        for t in turns:
            parts.append(f"<|{t.role.value}|>\n{t.content}<|end|>\n")
        if add_generation_prompt:
            parts.append("<|assistant|>\n")
    elif fmt is PromptFormat.MISTRAL:
        # Mistral instruct v3 layout; the system prompt rides in the first [INST].
        for t in merge_system(turns):
            if t.role is Role.USER:
                parts.append(f"[INST] {t.content.strip()} [/INST]")
            else:
                parts.append(f" {t.content.strip()}</s>")
    else:
        labels = {Role.SYSTEM: "System", Role.USER: "User", Role.ASSISTANT: "Assistant", Role.TOOL: "Tool"}
        for t in turns:
            parts.append(f"{labels[t.role]}: {t.content}\n")
        if add_generation_prompt:
            parts.append("Assistant:")
    return "".join(parts)
