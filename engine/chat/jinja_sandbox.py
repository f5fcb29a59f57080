"""The GGUF's own Jinja chat template, rendered in a strict sandbox (the template comes from a
file the user downloaded: it is untrusted code), with fallbacks for templates that refuse a
conversation's shape."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import jinja2
import jinja2.ext
import jinja2.nodes
import jinja2.sandbox

from engine.base.errors import EngineError
from engine.chat.formats import Turn, merge_consecutive, merge_system

if TYPE_CHECKING:
    from jinja2.parser import Parser


class TemplateError(EngineError):
    """A chat template that cannot render this conversation (invalid, refused or unsafe)."""


class _Sandbox(jinja2.sandbox.ImmutableSandboxedEnvironment):
    """Jinja's immutable sandbox, made strict: an unsafe attribute (``__class__``,
    ``list.append``...) raises at once. The stock sandbox returns an Undefined that
    renders as an empty string, so a hostile or broken template would go unnoticed."""

    def unsafe_undefined(self, obj: Any, attribute: str) -> jinja2.Undefined:
        raise jinja2.sandbox.SecurityError(
            f"access to attribute {attribute!r} of {type(obj).__name__!r} object is unsafe"
        )


class _GenerationTag(jinja2.ext.Extension):
    """``{% generation %}...{% endgeneration %}`` (used by some HF templates to mark
    assistant text for training masks): render the body unchanged."""

    tags = {"generation"}  # noqa: RUF012 - jinja2's Extension API declares it this way

    def parse(self, parser: Parser) -> list[jinja2.nodes.Node]:
        next(parser.stream)
        return parser.parse_statements(("name:endgeneration",), drop_needle=True)


class _RaisedByTemplate(Exception):
    """The template called ``raise_exception(message)``."""


def _raise_exception(message: object) -> None:
    raise _RaisedByTemplate(str(message))


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    # HF's override: Jinja's own tojson HTML-escapes '<', '>' and '&', which changes tool
    # schemas and any markup the model is meant to read.
    return json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


@functools.cache
def _environment() -> _Sandbox:
    # The same settings as transformers' apply_chat_template, so templates written for HF
    # produce the same whitespace here.
    env = _Sandbox(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[_GenerationTag, jinja2.ext.loopcontrols],
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


def _one_line(text: str, limit: int = 200) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


@functools.lru_cache(maxsize=16)
def _compile(source: str) -> jinja2.Template:
    try:
        return _environment().from_string(source)
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateError(
            f"The model's chat template is not valid (line {exc.lineno}): {_one_line(exc.message or '')}"
        ) from exc


def render_jinja(
    source: str,
    turns: Sequence[Turn],
    *,
    bos_token: str,
    eos_token: str,
    add_generation_prompt: bool,
    tools: Sequence[Mapping[str, Any]] = (),
) -> str:
    """Render ``turns`` with the Jinja template ``source``; raises TemplateError.

    ``tools`` (OpenAI function-tool specs) are passed as the template's ``tools`` variable,
    as transformers and llama.cpp do; None when there are none.

    When the template refuses the conversation (Gemma 2's "System role not
    supported", "Conversation roles must alternate"...), retry with the system prompt
    folded into the first user message, then with same-role runs joined as well."""
    attempts: list[list[Turn]] = [list(turns)]
    merged = merge_system(turns)
    if merged != attempts[-1]:
        attempts.append(merged)
    alternating = merge_consecutive(merged)
    if alternating != attempts[-1]:
        attempts.append(alternating)

    last: Exception | None = None
    for attempt in attempts:
        try:
            return _compile(source).render(
                messages=[t.as_template_message() for t in attempt],
                add_generation_prompt=add_generation_prompt,
                bos_token=bos_token,
                eos_token=eos_token,
                # transformers passes these as None when there are none; templates test them.
                tools=[dict(tool) for tool in tools] or None,
                documents=None,
            )
        except jinja2.sandbox.SecurityError as exc:
            # Not a matter of conversation shape: never retry, say what was blocked.
            raise TemplateError(
                f"The model's chat template was blocked by the sandbox: {_one_line(str(exc))}"
            ) from exc
        except TemplateError:
            raise
        except Exception as exc:  # a template can fail in any Python way
            last = exc
    assert last is not None
    if isinstance(last, _RaisedByTemplate):
        message = f"The model's chat template refused this conversation: {_one_line(str(last))}"
    else:
        message = f"The model's chat template failed: {_one_line(str(last) or type(last).__name__)}"
    raise TemplateError(message) from last
