"""Size-checked wrappers around llama.cpp's tokenizer, and a conversation tokenized with
earlier replies' own token ids spliced in. ``llama_cpp`` is imported inside the functions
only, so this module imports without llama.cpp."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.base.errors import EngineError
from engine.chat.messages import ChatMessage, Role
from engine.chat.template import ChatTemplate, RenderedPrompt


class TokenizationError(EngineError):
    """llama.cpp could not tokenize a prompt."""


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


def split_conversation(
    template: ChatTemplate, messages: Sequence[ChatMessage], tools: Sequence[Mapping[str, Any]] = ()
) -> ConversationPieces:
    """Render ``messages``, marking where earlier replies' exact token ids go.

    Each assistant message with ``tokens`` is rendered as a placeholder, so the ids the
    model generated can be spliced in instead of re-tokenizing the reply's text (which
    may tokenize differently and break prefix reuse). When a template does not keep
    the placeholders intact, the whole text is one piece.
    """
    rendered = template.render(messages, tools=tools)
    spliced = [
        i
        for i, m in enumerate(messages)
        if m.tokens and m.role is Role.ASSISTANT and not m.images and not m.tool_calls
    ]
    whole = ConversationPieces(rendered, (rendered.text,), ())
    if not spliced:
        return whole
    stand_ins = list(messages)
    for i in spliced:
        stand_ins[i] = ChatMessage(Role.ASSISTANT, _SPLICE.format(i))
    text = template.render(stand_ins, tools=tools).text
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
    vocab: Any,
    template: ChatTemplate,
    messages: Sequence[ChatMessage],
    tools: Sequence[Mapping[str, Any]] = (),
) -> tuple[list[int], RenderedPrompt]:
    """Render and tokenize a text-only conversation, splicing in earlier replies' ids."""
    split = split_conversation(template, messages, tools)
    tokens: list[int] = []
    for index, piece in enumerate(split.pieces):
        if index == 0:
            tokens += tokenize_prompt(vocab, RenderedPrompt(piece, (), "", split.rendered.adds_bos))
        else:
            tokens += tokenize(vocab, piece, add_special=False, parse_special=True)
        if index < len(split.replies):
            tokens += split.replies[index]
    return tokens, split.rendered
