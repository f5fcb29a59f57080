"""Chat prompts: render a conversation into the text a model expects, and turn tokens back
into text safely.

- ``ChatTemplate`` / ``render_prompt`` render messages with the GGUF's own Jinja chat
  template in a sandbox (the template comes from a file the user downloaded: it is
  untrusted code), or, when the model has none, with the built-in format of its
  architecture, or a plain "User:/Assistant:" format. Stop strings are derived from the
  template so a model that writes its end-of-turn marker as text still stops.
- ``tokenize`` / ``token_to_piece`` / ``tokenize_prompt`` are thin, size-checked wrappers
  around llama.cpp's tokenizer (``llama_cpp`` is imported inside them only, so this module
  imports without llama.cpp).
- ``IncrementalDetokenizer``, ``StopStringBuffer`` and ``TextStream`` turn generated token
  pieces (bytes that may end inside a UTF-8 character) into text deltas that never split
  a character and never leak any part of a stop string.
"""

from __future__ import annotations

import codecs
import enum
import functools
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import jinja2
import jinja2.ext
import jinja2.nodes
import jinja2.sandbox

from engine.errors import EngineError, InvalidChatRequest

if TYPE_CHECKING:
    from jinja2.parser import Parser

DEFAULT_MEDIA_MARKER = "<__media__>"
"""What llama.cpp's mtmd looks for in the prompt text, one per image (``mtmd_default_marker``)."""

# A word joiner: invisible, keeps a user-typed media marker from being taken for an image slot.
_MARKER_BREAK = "\u2060"


class TemplateError(EngineError):
    """A chat template that cannot render this conversation (invalid, refused or unsafe)."""


class TokenizationError(EngineError):
    """llama.cpp could not tokenize a prompt."""


class Role(enum.StrEnum):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"


class MediaPlacement(enum.Enum):
    """Where a message's media markers go relative to its text."""

    BEFORE_TEXT = "before"  # what llama.cpp's server and LM Studio do for attached images
    AFTER_TEXT = "after"


@dataclass(frozen=True)
class ChatMessage:
    """One turn. ``images`` are opaque to rendering (identities, ImageRef objects...):
    only how many there are matters here, one media marker each."""

    role: Role
    text: str
    images: tuple[Any, ...] = ()
    # For a reply this engine generated: its exact token ids. Spliced into the next
    # prompt instead of re-tokenizing ``text`` (which may tokenize differently), so
    # the next turn matches the cached KV token for token.
    tokens: tuple[int, ...] = ()
    # Which model made ``tokens`` (``Completion.model_identity``): ids mean something only
    # to the vocabulary that made them, so another model re-tokenizes ``text`` instead.
    tokens_model: str = ""

    def __post_init__(self) -> None:
        # Accept "user" as well as Role.USER; anything else is the caller's error, said in one line.
        try:
            object.__setattr__(self, "role", Role(self.role))
        except ValueError:
            roles = ", ".join(r.value for r in Role)
            raise InvalidChatRequest(f"Unknown message role {self.role!r}: use {roles}.") from None
        object.__setattr__(self, "text", clean_text(self.text, f"The {self.role.value} message"))
        object.__setattr__(self, "images", tuple(self.images))
        object.__setattr__(self, "tokens", tuple(self.tokens))


_SURROGATES = re.compile("[\ud800-\udfff]")


def clean_text(text: object, what: str) -> str:
    """Text as the engine takes it, checked once where it comes in.

    Lone surrogates, which is how Python carries bytes that were not UTF-8 (a command-line
    argument, a file name) and what a JSON string may hold, cannot reach llama.cpp's UTF-8
    tokenizer: each becomes U+FFFD, as a UTF-8 decoder with ``errors="replace"`` would make
    of the bytes. Anything but a string is refused with one line naming ``what`` it was.
    """
    if not isinstance(text, str):
        kind = "nothing" if text is None else type(text).__name__
        raise InvalidChatRequest(f"{what} must be text, not {kind}.")
    if text.isascii():
        return text
    return _SURROGATES.sub("\ufffd", text)


class PromptFormat(enum.StrEnum):
    """How a prompt was rendered (``RenderedPrompt.format_name``)."""

    JINJA = "jinja"  # the GGUF's own chat template
    GEMMA = "gemma"
    CHATML = "chatml"
    PHI3 = "phi3"
    MISTRAL = "mistral"
    PLAIN = "plain"


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


# --------------------------------------------------------------------------- formats

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

_FORMAT_STOPS: dict[PromptFormat, tuple[str, ...]] = {
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


# --------------------------------------------------------------------------- messages


@dataclass(frozen=True)
class _Turn:
    """A message with its media markers already placed in the content."""

    role: Role
    content: str


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


def _merge_system(turns: Sequence[_Turn]) -> list[_Turn]:
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
            rest[i] = _Turn(Role.USER, merged)
            return rest
    return [_Turn(Role.USER, system), *rest]


def _merge_consecutive(turns: Sequence[_Turn]) -> list[_Turn]:
    """Join runs of same-role messages (e.g. two user messages after a failed reply) for
    templates that insist roles alternate."""
    out: list[_Turn] = []
    for turn in turns:
        if out and out[-1].role is turn.role:
            out[-1] = _Turn(turn.role, f"{out[-1].content}\n\n{turn.content}")
        else:
            out.append(turn)
    return out


# --------------------------------------------------------------------------- built-in formats


def _render_builtin(fmt: PromptFormat, turns: Sequence[_Turn], add_generation_prompt: bool) -> str:
    # None of these write BOS: the tokenizer adds it (RenderedPrompt.adds_bos is False).
    parts: list[str] = []
    if fmt is PromptFormat.GEMMA:
        # Gemma has no system role; llama.cpp's built-in "gemma" template also trims.
        for t in _merge_system(turns):
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
        for t in _merge_system(turns):
            if t.role is Role.USER:
                parts.append(f"[INST] {t.content.strip()} [/INST]")
            else:
                parts.append(f" {t.content.strip()}</s>")
    else:
        labels = {Role.SYSTEM: "System", Role.USER: "User", Role.ASSISTANT: "Assistant"}
        for t in turns:
            parts.append(f"{labels[t.role]}: {t.content}\n")
        if add_generation_prompt:
            parts.append("Assistant:")
    return "".join(parts)


# --------------------------------------------------------------------------- jinja


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


def _render_jinja(
    source: str,
    turns: Sequence[_Turn],
    *,
    bos_token: str,
    eos_token: str,
    add_generation_prompt: bool,
) -> str:
    template = _compile(source)
    return template.render(
        messages=[{"role": t.role.value, "content": t.content} for t in turns],
        add_generation_prompt=add_generation_prompt,
        bos_token=bos_token,
        eos_token=eos_token,
        # transformers passes these as None when there are none; templates test them.
        tools=None,
        documents=None,
    )


def _jinja_with_fallbacks(
    source: str,
    turns: Sequence[_Turn],
    *,
    bos_token: str,
    eos_token: str,
    add_generation_prompt: bool,
) -> str:
    """Render; when the template refuses the conversation (Gemma 2's "System role not
    supported", "Conversation roles must alternate"...), retry with the system prompt
    folded into the first user message, then with same-role runs joined as well."""
    attempts: list[list[_Turn]] = [list(turns)]
    merged = _merge_system(turns)
    if merged != attempts[-1]:
        attempts.append(merged)
    alternating = _merge_consecutive(merged)
    if alternating != attempts[-1]:
        attempts.append(alternating)

    last: Exception | None = None
    for attempt in attempts:
        try:
            return _render_jinja(
                source,
                attempt,
                bos_token=bos_token,
                eos_token=eos_token,
                add_generation_prompt=add_generation_prompt,
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


# --------------------------------------------------------------------------- public rendering


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
    def stop_strings(self) -> tuple[str, ...]:
        if self.template:
            return template_stop_strings(self.template, self.eos_token)
        return _FORMAT_STOPS[self.format]

    def render(
        self, messages: Iterable[ChatMessage], *, add_generation_prompt: bool = True
    ) -> RenderedPrompt:
        messages = list(messages)
        turns = [_Turn(m.role, _content(m, self.media_marker, self.media_placement)) for m in messages]
        image_count = sum(len(m.images) for m in messages)
        if self.template:
            text = _jinja_with_fallbacks(
                self.template,
                turns,
                bos_token=self.bos_token,
                eos_token=self.eos_token,
                add_generation_prompt=add_generation_prompt,
            )
        else:
            text = _render_builtin(self.format, turns, add_generation_prompt)
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
    return chat.render(messages, add_generation_prompt=add_generation_prompt)


# --------------------------------------------------------------------------- tokens (llama.cpp)

_PIECE_BUFFER = 64  # bytes; longer pieces (runs of spaces in code vocabularies) retry


def _token_capacity(n_bytes: int) -> int:
    # A token covers at least one byte, plus BOS/EOS and SentencePiece's leading space.
    return n_bytes + 4


def tokenize(vocab: Any, text: str | bytes, add_special: bool, parse_special: bool) -> list[int]:
    """``llama_tokenize`` with its negative-size retry. ``vocab`` is a ``llama_vocab*``."""
    import llama_cpp

    data = text.encode("utf-8") if isinstance(text, str) else text
    capacity = _token_capacity(len(data))
    for _ in range(2):
        out = (llama_cpp.llama_token * capacity)()
        n = llama_cpp.llama_tokenize(vocab, data, len(data), out, capacity, add_special, parse_special)
        if n >= 0:
            return list(out[:n])
        if n == -(2**31):  # INT32_MIN: more tokens than an int32 can count
            break
        capacity = -n
    raise TokenizationError("The prompt is too long to tokenize.")


def token_to_piece(vocab: Any, token: int, special: bool) -> bytes:
    """The bytes of one token (may end inside a UTF-8 character). ``special``: render
    control tokens such as ``<|im_end|>`` as their text instead of nothing."""
    import ctypes

    import llama_cpp

    size = _PIECE_BUFFER
    for _ in range(2):
        buf = ctypes.create_string_buffer(size)
        n = llama_cpp.llama_token_to_piece(vocab, token, buf, size, 0, special)
        if n >= 0:
            return buf.raw[:n]
        size = -n
    raise TokenizationError(f"Token {token} could not be turned into text.")


def tokenize_prompt(vocab: Any, prompt: RenderedPrompt) -> list[int]:
    """Tokenize a rendered prompt: special tokens parsed, BOS added only when the
    vocabulary wants one and the template did not write it. BOS is prepended by hand
    rather than with ``add_special=True`` because that would also append EOS for the few
    vocabularies that set ``add_eos``, ending the turn before the model speaks."""
    import llama_cpp

    tokens = tokenize(vocab, prompt.text, add_special=False, parse_special=True)
    bos = llama_cpp.llama_vocab_bos(vocab)
    if not prompt.adds_bos and bos >= 0 and llama_cpp.llama_vocab_get_add_bos(vocab):
        tokens.insert(0, bos)
    return tokens


_SPLICE = "\ue000hearth-reply-{}\ue001"  # private-use characters: no one types these


@dataclass(frozen=True)
class ConversationPieces:
    """A rendered conversation cut around the replies whose token ids are known.

    ``pieces[i]`` is rendered text, ``replies[i]`` the ids that go between ``pieces[i]``
    and ``pieces[i + 1]``; there is always one more piece than replies.
    """

    rendered: RenderedPrompt
    pieces: tuple[str, ...]
    replies: tuple[tuple[int, ...], ...]


def split_conversation(template: ChatTemplate, messages: Sequence[ChatMessage]) -> ConversationPieces:
    """Render ``messages``, marking where earlier replies' exact token ids go.

    Each assistant message with ``tokens`` is rendered as a placeholder, so the ids the
    model generated can be spliced in instead of re-tokenizing the reply's text (which
    may tokenize differently and break prefix reuse). When a template does not keep
    the placeholders intact, the whole text is one piece.
    """
    rendered = template.render(messages)
    spliced = [i for i, m in enumerate(messages) if m.tokens and m.role is Role.ASSISTANT and not m.images]
    whole = ConversationPieces(rendered, (rendered.text,), ())
    if not spliced:
        return whole
    stand_ins = list(messages)
    for i in spliced:
        stand_ins[i] = ChatMessage(Role.ASSISTANT, _SPLICE.format(i))
    text = template.render(stand_ins).text
    markers = [_SPLICE.format(i) for i in spliced]
    positions = [text.find(marker) for marker in markers]
    if any(text.count(marker) != 1 for marker in markers) or positions != sorted(positions):
        return whole
    pieces: list[str] = []
    cursor = 0
    for marker, position in zip(markers, positions, strict=True):
        pieces.append(text[cursor:position])
        cursor = position + len(marker)
    pieces.append(text[cursor:])
    return ConversationPieces(rendered, tuple(pieces), tuple(messages[i].tokens for i in spliced))


def tokenize_conversation(
    vocab: Any, template: ChatTemplate, messages: Sequence[ChatMessage]
) -> tuple[list[int], RenderedPrompt]:
    """Render and tokenize a text-only conversation, splicing in earlier replies' ids."""
    split = split_conversation(template, messages)
    tokens: list[int] = []
    for index, piece in enumerate(split.pieces):
        if index == 0:
            tokens += tokenize_prompt(vocab, RenderedPrompt(piece, (), "", split.rendered.adds_bos))
        else:
            tokens += tokenize(vocab, piece, add_special=False, parse_special=True)
        if index < len(split.replies):
            tokens += split.replies[index]
    return tokens, split.rendered


# --------------------------------------------------------------------------- streaming text


class IncrementalDetokenizer:
    """Token pieces (bytes) in, text out, never splitting a UTF-8 character.

    Python's incremental decoder with ``errors="replace"`` keeps an incomplete trailing
    sequence for the next piece and only replaces bytes that can never become valid, so
    U+FFFD appears for truly invalid output, or at ``flush`` for a character the model
    never finished — not because a character was split across tokens.
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def push(self, piece: bytes) -> str:
        return self._decoder.decode(piece)

    def flush(self) -> str:
        """Release whatever is pending (an unfinished character becomes U+FFFD) and reset."""
        text = self._decoder.decode(b"", final=True)
        self._decoder.reset()
        return text

    @property
    def pending_bytes(self) -> int:
        return len(self._decoder.getstate()[0])


@dataclass(frozen=True)
class StreamChunk:
    """Text that is safe to show now, and the stop string that ended the stream, if any."""

    text: str
    stop_string: str | None = None

    @property
    def stopped(self) -> bool:
        return self.stop_string is not None


class StopStringBuffer:
    """Holds back text that might be the start of a stop string.

    ``push`` returns the text that can no longer be part of a stop string. When a stop
    string completes, the text before it is returned with ``stop_string`` set, and the
    stop string itself and anything after it are never returned. The stop string that
    completes first wins (ties: the one starting earliest), which makes the result
    independent of how the text was cut into pieces.
    """

    def __init__(self, stop_strings: Iterable[str]) -> None:
        self.stop_strings: tuple[str, ...] = tuple(dict.fromkeys(s for s in stop_strings if s))
        # Every proper prefix of a stop string: the suffixes worth holding back.
        self._prefixes = frozenset(s[:i] for s in self.stop_strings for i in range(1, len(s)))
        self._longest_prefix = max((len(p) for p in self._prefixes), default=0)
        self._held = ""
        self._stop: str | None = None

    @property
    def held(self) -> str:
        return self._held

    @property
    def stop_string(self) -> str | None:
        return self._stop

    @property
    def stopped(self) -> bool:
        return self._stop is not None

    def push(self, text: str) -> StreamChunk:
        if self._stop is not None:
            return StreamChunk("", self._stop)
        buffer = self._held + text
        match = self._first_match(buffer)
        if match is not None:
            start, stop = match
            self._held = ""
            self._stop = stop
            return StreamChunk(buffer[:start], stop)
        hold = self._hold_length(buffer)
        self._held = buffer[len(buffer) - hold :]
        return StreamChunk(buffer[: len(buffer) - hold])

    def flush(self) -> str:
        """The end of the stream: held text was not a stop string after all."""
        text, self._held = ("" if self._stop is not None else self._held), ""
        return text

    def _first_match(self, buffer: str) -> tuple[int, str] | None:
        best: tuple[int, int, str] | None = None  # (end, start, stop)
        for stop in self.stop_strings:
            start = buffer.find(stop)
            if start >= 0:
                key = (start + len(stop), start, stop)
                if best is None or key[:2] < best[:2]:
                    best = key
        return None if best is None else (best[1], best[2])

    def _hold_length(self, buffer: str) -> int:
        for k in range(min(len(buffer), self._longest_prefix), 0, -1):
            if buffer[-k:] in self._prefixes:
                return k
        return 0


class TextStream:
    """Generated pieces (bytes) in, safe text deltas out: UTF-8 assembled across pieces,
    stop strings cut out. One per generating request."""

    def __init__(self, stop_strings: Iterable[str] = ()) -> None:
        self._detokenizer = IncrementalDetokenizer()
        self._stops = StopStringBuffer(stop_strings)

    @property
    def stopped(self) -> bool:
        return self._stops.stopped

    def push(self, piece: bytes) -> StreamChunk:
        return self._stops.push(self._detokenizer.push(piece))

    def finish(self) -> StreamChunk:
        """End of generation: release held text (and any unfinished character as U+FFFD)."""
        chunk = self._stops.push(self._detokenizer.flush())
        if chunk.stopped:
            return chunk
        return StreamChunk(chunk.text + self._stops.flush())
