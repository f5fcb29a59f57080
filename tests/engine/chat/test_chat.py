"""engine.chat: prompt rendering (Jinja sandbox, fallbacks), tokenizer wrappers, and the
streaming text path (incremental UTF-8 + stop strings)."""

from __future__ import annotations

import itertools
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.base.errors import EngineError, InvalidChatRequest
from engine.chat import (
    ChatMessage,
    ChatTemplate,
    IncrementalDetokenizer,
    MediaPlacement,
    PromptFormat,
    RenderedPrompt,
    Role,
    StopStringBuffer,
    StreamChunk,
    TemplateError,
    TextStream,
    builtin_format,
    jinja_sandbox,
    render_prompt,
    template_stop_strings,
    token_to_piece,
    tokenize,
    tokenize_prompt,
)
from engine.chat import tokens as chat_tokens
from engine.devtools.tiny_models import DEFAULT_CHAT_TEMPLATE
from engine.native.backend import ensure_backend

# The real Gemma 2 instruct template (abridged only in layout): refuses a system message
# and any conversation whose roles do not alternate.
GEMMA2_TEMPLATE = (
    "{{ bos_token }}"
    "{% if messages[0]['role'] == 'system' %}"
    "{{ raise_exception('System role not supported') }}"
    "{% endif %}"
    "{% for message in messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}"
    "{% if (message['role'] == 'assistant') %}{% set role = 'model' %}"
    "{% else %}{% set role = message['role'] %}{% endif %}"
    "{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}"
)

# Llama 3 style: writes BOS itself, ends turns with <|eot_id|>.
LLAMA3_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim"
    " + '<|eot_id|>' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)

SYSTEM = ChatMessage(Role.SYSTEM, "Be brief.")
HELLO = ChatMessage(Role.USER, "  Hello there  ")
REPLY = ChatMessage(Role.ASSISTANT, "Hi!")
AGAIN = ChatMessage(Role.USER, "And again?")
CONVERSATION = [SYSTEM, HELLO, REPLY, AGAIN]
# CONVERSATION in Gemma's turn format (the template writes <bos> before it, the tokenizer otherwise).
GEMMA_CONVERSATION = (
    "<start_of_turn>user\nBe brief.\n\nHello there<end_of_turn>\n"
    "<start_of_turn>model\nHi!<end_of_turn>\n"
    "<start_of_turn>user\nAnd again?<end_of_turn>\n"
    "<start_of_turn>model\n"
)


def render(
    messages: list[ChatMessage], template: str | None, arch: str = "llama", **kw: Any
) -> RenderedPrompt:
    kw.setdefault("bos_token", "<s>")
    kw.setdefault("eos_token", "</s>")
    return render_prompt(messages, template=template, architecture=arch, **kw)


# --------------------------------------------------------------------------- messages


def test_chat_message_takes_role_strings_and_rejects_unknown_roles() -> None:
    assert ChatMessage("user", "x").role is Role.USER  # type: ignore[arg-type]
    assert ChatMessage(Role.USER, "x", images=["a"]).images == ("a",)  # type: ignore[arg-type]
    assert ChatMessage("tool", "x", tool_call_id="call_1").role is Role.TOOL  # type: ignore[arg-type]
    with pytest.raises(InvalidChatRequest, match="Unknown message role 'function'"):
        ChatMessage("function", "x")  # type: ignore[arg-type]


def test_module_imports_without_llama_cpp() -> None:
    code = "import sys; sys.modules['llama_cpp'] = None; import engine.chat; print('ok')"
    root = Path(__file__).resolve().parents[3]
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ok"


# --------------------------------------------------------------------------- jinja


def test_tiny_chatml_template_renders_exactly() -> None:
    prompt = render(CONVERSATION, DEFAULT_CHAT_TEMPLATE)
    assert prompt.text == (
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        "<|im_start|>user\n  Hello there  <|im_end|>\n"
        "<|im_start|>assistant\nHi!<|im_end|>\n"
        "<|im_start|>user\nAnd again?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert prompt.format_name == "jinja"
    assert prompt.stop_strings == ("<|im_end|>",)
    assert prompt.adds_bos is False and prompt.add_special is True


def test_generation_prompt_can_be_left_out() -> None:
    prompt = render([HELLO], DEFAULT_CHAT_TEMPLATE, add_generation_prompt=False)
    assert prompt.text == "<|im_start|>user\n  Hello there  <|im_end|>\n"


def test_template_that_refuses_system_role_gets_it_merged_into_first_user_turn() -> None:
    prompt = render(CONVERSATION, GEMMA2_TEMPLATE, arch="gemma2", bos_token="<bos>", eos_token="<eos>")
    assert prompt.text == "<bos>" + GEMMA_CONVERSATION
    assert prompt.adds_bos is True and prompt.add_special is False
    assert prompt.stop_strings == ("<end_of_turn>",)


def test_template_that_requires_alternation_gets_consecutive_turns_joined() -> None:
    # e.g. a reply failed and the user wrote again
    messages = [ChatMessage(Role.USER, "first"), ChatMessage(Role.USER, "second")]
    prompt = render(messages, GEMMA2_TEMPLATE, bos_token="<bos>")
    assert prompt.text == ("<bos><start_of_turn>user\nfirst\n\nsecond<end_of_turn>\n<start_of_turn>model\n")


def test_conversations_the_template_accepts_are_rendered_unchanged() -> None:
    # no merging when none is needed: the user's leading spaces reach the template's trim
    messages = [ChatMessage(Role.USER, "  a"), REPLY, AGAIN]
    assert render(messages, GEMMA2_TEMPLATE, bos_token="").text == (
        "<start_of_turn>user\na<end_of_turn>\n<start_of_turn>model\nHi!<end_of_turn>\n"
        "<start_of_turn>user\nAnd again?<end_of_turn>\n<start_of_turn>model\n"
    )
    assert render(messages, "{{ messages[0].content }}").text == "  a"


def test_template_refusal_that_merging_cannot_fix_is_a_typed_one_line_error() -> None:
    template = "{{ raise_exception('Only\n  tools   are supported') }}"
    with pytest.raises(TemplateError) as info:
        render([SYSTEM, HELLO], template)
    assert isinstance(info.value, EngineError)
    assert info.value.message == (
        "The model's chat template refused this conversation: Only tools are supported"
    )


def test_template_that_breaks_at_runtime_is_a_typed_error() -> None:
    with pytest.raises(TemplateError, match="failed"):
        render([HELLO], "{{ messages[0]['content'] + 1 }}")


def test_invalid_template_syntax_is_a_typed_error() -> None:
    with pytest.raises(TemplateError, match="not valid") as info:
        render([HELLO], "{% for m in messages %}{{ m.content }}")
    assert "\n" not in info.value.message


@pytest.mark.parametrize(
    "template",
    [
        "{{ ''.__class__ }}",
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        "{{ messages.__class__ }}",
        "{{ raise_exception.__globals__ }}",
        "{% set x = messages.append(1) %}{{ x }}",  # the environment is immutable
        "{{ messages[0].update({'role': 'system'}) }}",
    ],
)
def test_sandbox_blocks_attribute_abuse_with_a_typed_error(template: str) -> None:
    with pytest.raises(TemplateError) as info:
        render([HELLO], template)
    assert info.value.message.startswith("The model's chat template was blocked by the sandbox")
    assert "\n" not in info.value.message


def test_tojson_is_like_transformers_unicode_kept_and_markup_unescaped() -> None:
    prompt = render([ChatMessage(Role.USER, "café <b>&")], "{{ messages | tojson }}", media_marker="")
    assert prompt.text == '[{"role": "user", "content": "café <b>&"}]'
    indented = render([HELLO], "{{ {'a': 1} | tojson(indent=2) }}")
    assert indented.text == '{\n  "a": 1\n}'


def test_template_helpers_and_extensions_used_by_real_templates() -> None:
    template = (
        "{{ strftime_now('%Y') | length }}|"
        "{% for m in messages %}{% if loop.index > 1 %}{% break %}{% endif %}{{ m.role }}{% endfor %}|"
        "{% generation %}{{ messages[-1].content }}{% endgeneration %}|"
        "{% if tools %}tools{% else %}none{% endif %}|{{ eos_token }}"
    )
    assert render([HELLO, AGAIN], template).text == "4|user|And again?|none|</s>"


def test_trim_and_lstrip_blocks_like_transformers() -> None:
    template = "{% for m in messages %}\n    {% if true %}\n{{ m.content }}\n    {% endif %}\n{% endfor %}"
    assert render([AGAIN], template).text == "And again?\n"


def test_compiled_templates_are_cached() -> None:
    jinja_sandbox._compile.cache_clear()
    render([HELLO], DEFAULT_CHAT_TEMPLATE)
    render([AGAIN], DEFAULT_CHAT_TEMPLATE)
    info = jinja_sandbox._compile.cache_info()
    assert (info.misses, info.hits) == (1, 1)


def test_bos_written_by_the_template_is_detected() -> None:
    prompt = render([HELLO], LLAMA3_TEMPLATE, bos_token="<|begin_of_text|>", eos_token="<|end_of_text|>")
    assert prompt.text.startswith("<|begin_of_text|><|start_header_id|>user")
    assert prompt.adds_bos is True
    assert prompt.stop_strings == ("<|eot_id|>",)
    assert render([HELLO], LLAMA3_TEMPLATE, bos_token="").adds_bos is False


def test_stop_strings_are_detected_in_template_text() -> None:
    assert template_stop_strings(DEFAULT_CHAT_TEMPLATE) == ("<|im_end|>",)
    assert template_stop_strings(GEMMA2_TEMPLATE, "<eos>") == ("<end_of_turn>",)
    assert template_stop_strings("{{ '<|user|>' + c + '<|end|>' }}{{ '<|endoftext|>' }}") == (
        "<|end|>",
        "<|endoftext|>",
    )
    # a template that closes turns with the EOS variable stops on its text
    assert template_stop_strings("{{ m.content + eos_token }}", "</s>") == ("</s>",)
    assert template_stop_strings("{{ m.content + eos_token }}", "") == ()
    assert template_stop_strings("{{ m.content }}") == ()


# --------------------------------------------------------------------------- built-in formats


def test_gemma3_without_template_uses_the_gemma_format_exactly() -> None:
    prompt = render(CONVERSATION, None, arch="gemma3", bos_token="<bos>", eos_token="<eos>")
    assert prompt.text == GEMMA_CONVERSATION
    assert prompt.format_name == "gemma"
    assert prompt.stop_strings == ("<end_of_turn>",)
    assert prompt.adds_bos is False  # the tokenizer adds <bos>


def test_gemma_fallback_matches_the_gemma_template_after_its_bos() -> None:
    fallback = render(CONVERSATION, None, arch="gemma3", bos_token="<bos>")
    templated = render(CONVERSATION, GEMMA2_TEMPLATE, arch="gemma2", bos_token="<bos>")
    assert templated.text == "<bos>" + fallback.text


def test_gemma_fallback_with_only_a_system_prompt() -> None:
    prompt = render([SYSTEM], None, arch="gemma")
    assert prompt.text == "<start_of_turn>user\nBe brief.<end_of_turn>\n<start_of_turn>model\n"


def test_chatml_fallback_for_llama_and_qwen() -> None:
    expected = (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n"
    )
    for arch in ("llama", "qwen2", "qwen3"):
        prompt = render([SYSTEM, ChatMessage(Role.USER, "Q")], None, arch=arch)
        assert prompt.text == expected
        assert prompt.stop_strings == ("<|im_end|>",)
        assert prompt.format_name == "chatml"


def test_phi3_fallback() -> None:
    prompt = render([SYSTEM, ChatMessage(Role.USER, "Q")], None, arch="phi3")
    assert prompt.text == "<|system|>\nBe brief.<|end|>\n<|user|>\nQ<|end|>\n<|assistant|>\n"
    assert prompt.stop_strings == ("<|end|>",)


def test_mistral_fallback() -> None:
    prompt = render(CONVERSATION, None, arch="mistral3")
    assert prompt.text == "[INST] Be brief.\n\nHello there [/INST] Hi!</s>[INST] And again? [/INST]"
    assert prompt.stop_strings == ("</s>", "[INST]")


def test_plain_fallback_for_unknown_architectures() -> None:
    prompt = render(CONVERSATION, None, arch="gpt2")
    assert prompt.text == (
        "System: Be brief.\nUser:   Hello there  \nAssistant: Hi!\nUser: And again?\nAssistant:"
    )
    assert prompt.format_name == "plain"
    assert prompt.stop_strings == ("\nUser:",)


def test_empty_template_text_counts_as_no_template() -> None:
    assert render([HELLO], "", arch="gemma3").format_name == "gemma"


@pytest.mark.parametrize(
    ("arch", "fmt"),
    [
        ("gemma", PromptFormat.GEMMA),
        ("gemma2", PromptFormat.GEMMA),
        ("gemma3", PromptFormat.GEMMA),
        ("gemma3n", PromptFormat.GEMMA),
        ("llama", PromptFormat.CHATML),
        ("qwen2", PromptFormat.CHATML),
        ("qwen3moe", PromptFormat.CHATML),
        ("phi3", PromptFormat.PHI3),
        ("mistral3", PromptFormat.MISTRAL),
        ("gpt2", PromptFormat.PLAIN),
        ("", PromptFormat.PLAIN),
    ],
)
def test_builtin_format_by_architecture(arch: str, fmt: PromptFormat) -> None:
    assert builtin_format(arch) is fmt


def test_chat_template_object_exposes_format_and_stops_before_rendering() -> None:
    template = ChatTemplate(template=None, architecture="gemma3", bos_token="<bos>")
    assert template.format is PromptFormat.GEMMA
    assert template.stop_strings == ("<end_of_turn>",)
    assert template.render([HELLO]).text == render([HELLO], None, arch="gemma3").text


# --------------------------------------------------------------------------- media markers


def test_one_media_marker_per_image_before_the_text() -> None:
    messages = [ChatMessage(Role.USER, "What is this?", images=("img-a", "img-b")), REPLY, AGAIN]
    prompt = render(messages, DEFAULT_CHAT_TEMPLATE)
    assert prompt.image_count == 2
    assert prompt.text.count("<__media__>") == 2
    assert "<|im_start|>user\n<__media__>\n<__media__>\nWhat is this?<|im_end|>" in prompt.text


def test_media_markers_in_fallback_formats_and_custom_marker() -> None:
    message = ChatMessage(Role.USER, "Describe", images=(object(),))
    gemma = render([message], None, arch="gemma3", media_marker="<start_of_image>")
    assert gemma.text == (
        "<start_of_turn>user\n<start_of_image>\nDescribe<end_of_turn>\n<start_of_turn>model\n"
    )
    after = render([message], None, arch="qwen2", media_placement=MediaPlacement.AFTER_TEXT)
    assert "<|im_start|>user\nDescribe\n<__media__><|im_end|>" in after.text


def test_image_only_message_has_just_the_markers() -> None:
    prompt = render([ChatMessage(Role.USER, "", images=("a",))], DEFAULT_CHAT_TEMPLATE)
    assert prompt.text.startswith("<|im_start|>user\n<__media__><|im_end|>")


def test_images_survive_system_merging() -> None:
    messages = [SYSTEM, ChatMessage(Role.USER, "Look", images=("a",))]
    prompt = render(messages, GEMMA2_TEMPLATE, bos_token="<bos>")
    assert "<start_of_turn>user\nBe brief.\n\n<__media__>\nLook<end_of_turn>" in prompt.text
    assert prompt.image_count == 1


def test_user_typed_marker_does_not_become_an_image_slot() -> None:
    prompt = render([ChatMessage(Role.USER, "What does <__media__> mean?")], DEFAULT_CHAT_TEMPLATE)
    assert prompt.text.count("<__media__>") == 0
    assert prompt.image_count == 0


def test_template_that_drops_images_is_reported_before_mtmd_sees_it() -> None:
    template = "{% for m in messages %}{{ m.role }}{% endfor %}"
    with pytest.raises(TemplateError, match="0 image slots for 1 images"):
        render([ChatMessage(Role.USER, "x", images=("a",))], template)


# --------------------------------------------------------------------------- detokenizer


def pieces_of(text: str, size: int = 1) -> list[bytes]:
    data = text.encode("utf-8")
    return [data[i : i + size] for i in range(0, len(data), size)]


@pytest.mark.parametrize("text", ["é", "你好", "😀", "a😀b你", "naïve café 👩‍👩‍👧"])
def test_detokenizer_assembles_characters_split_into_single_bytes(text: str) -> None:
    detok = IncrementalDetokenizer()
    data, shown = text.encode(), ""
    for n in range(1, len(data) + 1):
        shown += detok.push(data[n - 1 : n])
        # exactly the characters whose last byte has arrived, never a replacement char
        assert shown == data[:n].decode("utf-8", errors="ignore")
    assert shown + detok.flush() == text


def test_detokenizer_holds_partial_bytes_until_the_character_completes() -> None:
    detok = IncrementalDetokenizer()
    assert detok.push(b"a\xe4\xbd") == "a"
    assert detok.pending_bytes == 2
    assert detok.push(b"\xa0!") == "你!"
    assert detok.pending_bytes == 0


def test_detokenizer_replaces_only_invalid_bytes_and_unfinished_tail_at_flush() -> None:
    detok = IncrementalDetokenizer()
    assert detok.push(b"\xff") == "\ufffd"  # can never be valid: replaced at once
    assert detok.push(b"ok\xf0\x9f") == "ok"  # could still become an emoji: held
    assert detok.flush() == "\ufffd"  # the model never finished it
    assert detok.push(b"x") == "x"  # flush reset the decoder


# --------------------------------------------------------------------------- stop strings


def feed(buffer: StopStringBuffer, parts: list[str]) -> tuple[list[StreamChunk], str]:
    chunks = [buffer.push(p) for p in parts]
    return chunks, buffer.flush()


def test_stop_string_split_across_pieces_never_leaks() -> None:
    buffer = StopStringBuffer(["<|im_end|>"])
    chunks, rest = feed(buffer, ["Hello", " world<|", "im", "_end", "|>", "ignored"])
    assert [c.text for c in chunks] == ["Hello", " world", "", "", "", ""]
    assert chunks[4].stop_string == "<|im_end|>" and chunks[5].stopped
    assert rest == ""


def test_stop_string_at_the_very_start() -> None:
    buffer = StopStringBuffer(["<end_of_turn>"])
    chunk = buffer.push("<end_of_turn>more")
    assert chunk == StreamChunk("", "<end_of_turn>")
    assert buffer.flush() == ""


def test_prefix_that_turns_out_not_to_be_a_stop_is_released() -> None:
    buffer = StopStringBuffer(["<|im_end|>"])
    assert buffer.push("a <|im").text == "a "
    assert buffer.held == "<|im"
    assert buffer.push("_start").text == "<|im_start"
    assert buffer.push("<").text == ""
    assert buffer.flush() == "<"


def test_held_text_is_released_at_flush() -> None:
    buffer = StopStringBuffer(["\nUser:"])
    chunks, rest = feed(buffer, ["Sure.\nUs"])
    assert chunks[0].text == "Sure." and rest == "\nUs"


def test_overlapping_stop_strings_the_first_to_complete_wins() -> None:
    # "bc" completes before "abcd" would, however the text is cut
    for parts in (["abcd"], ["a", "b", "c", "d"], ["ab", "cd"]):
        chunks, _ = feed(StopStringBuffer(["abcd", "bc"]), parts)
        assert "".join(c.text for c in chunks) == "a"
        assert next(c.stop_string for c in chunks if c.stopped) == "bc"
    # same end: the longer (earlier-starting) one wins
    chunks, _ = feed(StopStringBuffer(["c", "abc"]), ["xab", "c"])
    assert chunks == [StreamChunk("x"), StreamChunk("", "abc")]


def test_self_overlapping_stop_string() -> None:
    # "aab": after "aaa" only the last two a's can still start it
    buffer = StopStringBuffer(["aab"])
    assert buffer.push("aaa").text == "a"
    assert buffer.held == "aa"
    assert buffer.push("a").text == "a"
    assert buffer.push("b") == StreamChunk("", "aab")


def test_no_stop_strings_pass_everything_through() -> None:
    buffer = StopStringBuffer(["", ""])
    assert buffer.push("abc").text == "abc" and buffer.held == ""


def test_text_stream_combines_utf8_and_stop_strings() -> None:
    stream = TextStream(["你好"])
    text = "é 你好 world"
    chunks = [stream.push(p) for p in pieces_of(text)]
    assert "".join(c.text for c in chunks) == "é "
    assert stream.stopped and stream.finish() == StreamChunk("", "你好")


def test_text_stream_finish_releases_held_text_and_broken_tail() -> None:
    stream = TextStream(["<end_of_turn>"])
    assert stream.push(b"ok <end").text == "ok "
    assert stream.push(b"\xe4").text == ""
    assert stream.finish() == StreamChunk("<end\ufffd")


# --------------------------------------------------------------------------- property test

STOPS = ["<|im_end|>", "\nUser:", "ab", "aab", "bab", "é你", "😀x", "好好", "a"]
FRAGMENTS = [*STOPS, "<|im", "_end", "|>", "\nUs", "er", "b", "é", "你", "好", "😀", "x", " ", "z", "\n"]


def expected_output(text: str, stops: list[str]) -> tuple[str, str | None]:
    """Oracle, character by character: the first stop string to complete (ties: the
    longest) and the text before it."""
    for end in range(1, len(text) + 1):
        done = [s for s in stops if s and text[:end].endswith(s)]
        if done:
            stop = max(done, key=len)
            return text[: end - len(stop)], stop
    return text, None


@settings(max_examples=300, deadline=None)
@given(
    fragments=st.lists(st.sampled_from(FRAGMENTS), max_size=14),
    stops=st.lists(st.sampled_from(STOPS), max_size=3),
    data=st.data(),
)
def test_stream_output_is_text_up_to_first_stop_however_bytes_are_cut(
    fragments: list[str], stops: list[str], data: st.DataObject
) -> None:
    text = "".join(fragments)
    raw = text.encode("utf-8")
    cuts = sorted(set(data.draw(st.lists(st.integers(0, len(raw)), max_size=len(raw) + 1))))
    bounds = [0, *cuts, len(raw)]
    pieces = [raw[a:b] for a, b in itertools.pairwise(bounds)]

    expected, expected_stop = expected_output(text, stops)
    detok, buffer = IncrementalDetokenizer(), StopStringBuffer(stops)
    emitted = ""
    stop: str | None = None
    for piece in pieces:
        chunk = buffer.push(detok.push(piece))
        assert "\ufffd" not in chunk.text  # never half a character
        emitted += chunk.text
        assert expected.startswith(emitted)  # nothing that belongs to a stop string
        if chunk.stopped:
            stop = chunk.stop_string
            break
        # Nothing emitted could still be the start of a stop string in progress.
        seen = emitted + buffer.held
        for p in range(len(emitted)):
            assert not any(s.startswith(seen[p:]) for s in buffer.stop_strings)
    if stop is None:
        tail = buffer.push(detok.flush())
        emitted += tail.text
        stop = tail.stop_string
        emitted += buffer.flush()
    assert emitted == expected
    assert stop == expected_stop


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=40), size=st.integers(1, 5))
def test_detokenizer_round_trips_any_text(text: str, size: int) -> None:
    # surrogates cannot be encoded; everything else must come back identical
    data = text.encode("utf-8", errors="ignore")
    detok = IncrementalDetokenizer()
    out = "".join(detok.push(data[i : i + size]) for i in range(0, len(data), size)) + detok.flush()
    assert out == data.decode("utf-8")


# --------------------------------------------------------------------------- llama.cpp tokenizer


@contextmanager
def vocab_only(path: Path) -> Iterator[Any]:
    """The vocabulary of the model at ``path`` only (no weights), freed on exit."""
    llama_cpp = pytest.importorskip("llama_cpp")
    assert ensure_backend()
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    params.n_gpu_layers = 0
    model = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
    assert model, f"the vocabulary of {path.name} did not load"
    try:
        yield model
    finally:
        llama_cpp.llama_model_free(model)


@pytest.fixture(scope="module")
def tiny_vocab_model(tiny_model: Path) -> Iterator[Any]:
    """The tiny model's vocabulary only (no weights), freed after the module."""
    with vocab_only(tiny_model) as model:
        yield model


@pytest.fixture()
def vocab(tiny_vocab_model: Any) -> Any:
    import llama_cpp

    return llama_cpp.llama_model_get_vocab(tiny_vocab_model)


def detokenize(vocab: Any, tokens: list[int], special: bool = True) -> str:
    detok = IncrementalDetokenizer()
    return "".join(detok.push(token_to_piece(vocab, t, special)) for t in tokens) + detok.flush()


def test_tokenize_round_trip_with_multibyte_text(vocab: Any) -> None:
    text = "hello你好é😀"
    tokens = tokenize(vocab, text, add_special=False, parse_special=False)
    assert tokens and all(isinstance(t, int) for t in tokens)
    # SentencePiece may prefix a space to the first word
    assert detokenize(vocab, tokens) in (text, " " + text)
    # the tiny vocabulary spells CJK and emoji as byte tokens: pieces end mid-character
    assert any(
        len(token_to_piece(vocab, t, True)) == 1 and token_to_piece(vocab, t, True)[0] >= 0x80 for t in tokens
    )


def test_special_tokens_are_parsed_only_when_asked(vocab: Any) -> None:
    im_end = 4  # engine.devtools.tiny_models.tiny_vocab
    assert tokenize(vocab, "<|im_end|>", add_special=False, parse_special=True) == [im_end]
    assert im_end not in tokenize(vocab, "<|im_end|>", add_special=False, parse_special=False)
    assert token_to_piece(vocab, im_end, True) == b"<|im_end|>"
    assert token_to_piece(vocab, im_end, False) == b""


def test_add_special_adds_bos(vocab: Any) -> None:
    assert tokenize(vocab, "hi", add_special=True, parse_special=False)[0] == 1
    assert tokenize(vocab, "hi", add_special=False, parse_special=False)[0] != 1
    assert tokenize(vocab, "", add_special=False, parse_special=False) == []


def test_tokenize_and_piece_retry_when_the_buffer_is_too_small(
    vocab: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = "你好" * 40
    expected = tokenize(vocab, text, add_special=True, parse_special=True)
    monkeypatch.setattr(chat_tokens, "_token_capacity", lambda n: 1)
    assert tokenize(vocab, text, add_special=True, parse_special=True) == expected
    monkeypatch.setattr(chat_tokens, "_PIECE_BUFFER", 1)
    assert token_to_piece(vocab, 4, True) == b"<|im_end|>"


def test_tokenize_prompt_adds_bos_exactly_once(vocab: Any) -> None:
    plain = render([HELLO], DEFAULT_CHAT_TEMPLATE)
    tokens = tokenize_prompt(vocab, plain)
    assert tokens[:2] == [1, 3]  # <s> <|im_start|>
    with_bos = render([HELLO], "{{ bos_token }}" + DEFAULT_CHAT_TEMPLATE)
    assert with_bos.adds_bos
    tokens = tokenize_prompt(vocab, with_bos)
    assert tokens[:2] == [1, 3] and tokens.count(1) == 1


def test_chat_template_from_model(tiny_vocab_model: Any, vocab: Any) -> None:
    template = ChatTemplate.from_model(tiny_vocab_model)
    assert template.template == DEFAULT_CHAT_TEMPLATE
    assert template.architecture == "llama"
    assert (template.bos_token, template.eos_token) == ("<s>", "</s>")
    prompt = template.render([ChatMessage(Role.USER, "hi", images=("a",))])
    assert prompt.stop_strings == ("<|im_end|>",)
    tokens = tokenize_prompt(vocab, prompt)
    assert tokens.count(3) == 2 and tokens.count(4) == 1  # two <|im_start|>, one <|im_end|>


@pytest.mark.gemma
def test_gemma3_270m_has_no_template_and_gets_the_gemma_format(gemma_path: Path) -> None:
    llama_cpp = pytest.importorskip("llama_cpp")
    with vocab_only(gemma_path) as model:
        template = ChatTemplate.from_model(model)
        assert (template.template, template.architecture) == (None, "gemma3")
        prompt = template.render([SYSTEM, ChatMessage(Role.USER, "Hi")])
        assert prompt.format_name == "gemma" and not prompt.adds_bos
        vocab = llama_cpp.llama_model_get_vocab(model)
        tokens = tokenize_prompt(vocab, prompt)
        pieces = [token_to_piece(vocab, t, True) for t in tokens]
        # turn markers are single special tokens, and the vocabulary's <bos> comes once, first
        assert pieces[:4] == [b"<bos>", b"<start_of_turn>", b"user", b"\n"]
        assert pieces.count(b"<bos>") == 1 and pieces.count(b"<start_of_turn>") == 2
        assert b"".join(pieces[1:]).decode() == prompt.text
        end_of_turn = tokens[pieces.index(b"<end_of_turn>")]
        assert llama_cpp.llama_vocab_is_eog(vocab, end_of_turn)
