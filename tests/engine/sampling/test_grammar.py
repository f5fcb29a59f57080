"""Grammars before they reach llama.cpp: the GBNF check agrees with llama.cpp's parser and
refuses what would hurt the process, JSON schemas convert (or name the part they cannot),
JSON_OBJECT_GRAMMAR and schema grammars accept exactly their language, and SamplingParams
validates every new field."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.base.errors import InvalidChatRequest
from engine.sampling.gbnf import MAX_ELEMENTS, GrammarSyntaxError, check_gbnf
from engine.sampling.grammar import JSON_OBJECT_GRAMMAR, Grammar, grammar_from_json_schema
from engine.sampling.params import MAX_LOGPROBS, SamplingParams
from tests.engine.chat.test_chat import vocab_only

EOS = 2  # engine.devtools.tiny_models.tiny_vocab
BYTE0 = 5  # the token of byte 0x00; byte b is token BYTE0 + b


@pytest.fixture(scope="module")
def tiny_vocab(tiny_model: Path) -> Iterator[Any]:
    import llama_cpp

    with vocab_only(tiny_model) as model:
        yield llama_cpp.llama_model_get_vocab(model)


def native_parses(vocab: Any, gbnf: str, root: str = "root") -> bool:
    import llama_cpp as ll

    sampler = ll.llama_sampler_init_grammar(vocab, gbnf.encode(), root.encode())
    if not sampler:
        return False
    ll.llama_sampler_free(sampler)
    return True


def native_accepts(vocab: Any, grammar: Grammar, text: str) -> tuple[bool, bool]:
    """Feed ``text`` byte by byte to llama.cpp's grammar sampler: (every byte allowed, the
    grammar complete after it). Never accepts a byte the grammar rejects (that aborts)."""
    import ctypes

    import llama_cpp as ll

    sampler = ll.llama_sampler_init_grammar(vocab, grammar.gbnf.encode(), grammar.root.encode())
    assert sampler

    def allowed(token: int) -> bool:
        data = (ll.llama_token_data * 1)()
        data[0].id, data[0].logit = token, 1.0
        array = ll.llama_token_data_array(data, 1, -1, False)
        ll.llama_sampler_apply(sampler, ctypes.byref(array))
        return data[0].logit != -math.inf

    try:
        for byte in text.encode():
            if not allowed(BYTE0 + byte):
                return False, False
            ll.llama_sampler_accept(sampler, BYTE0 + byte)
        return True, allowed(EOS)
    finally:
        ll.llama_sampler_free(sampler)


def refused(gbnf: str, root: str = "root") -> str:
    with pytest.raises(GrammarSyntaxError) as info:
        check_gbnf(gbnf, root)
    return str(info.value)


# --------------------------------------------------------------------------- GBNF check

VALID = [
    'root ::= "a"',
    'root ::= "a" | "b" ("c" | [d-f])* "g"?',
    'root ::= x\nx ::= [^"\\\\] "\\x41" "\\u00e9" "\\U0001F600"',
    "root ::= [a-z]{2,5} [0-9]{3} [a]{0,} [b]{1,}",
    'root ::= ( "a"\n   | "b" )  # a comment\n',
    "root ::= x y\nx ::= y?\ny ::= [a]",
    'root ::= "a" root | "b"',  # right recursion is fine
    'root ::= a root | "x"\na ::= "b"?',  # llama.cpp only sees empty alternatives written out
    'root ::= . "\\n" [\\]\\-\\[]',
    'root ::= <[42]> !<[7]> "x"',
    'root   ::=   [ \\t\\n]*   obj\r\nobj ::= "{" "}"\r\n',
    JSON_OBJECT_GRAMMAR.gbnf,
]

INVALID = [
    ("", "empty"),
    ('foo ::= "a"', "no 'root' rule"),
    ("root ::= x", "'x' is used but never defined"),
    ('root ::= root "a" | "b"', "'root' is left-recursive"),
    ('root ::= a\na ::= b "x"\nb ::= a | "y"', "left-recursive"),
    ('root ::= "a', "unexpected end of input in a string at line 1, column 12"),
    ('root ::= "a" \\q', "expecting newline or end at line 1, column 14"),
    ('root ::= "\\q"', "unknown escape"),
    ('root ::= "\\x4"', "expecting 2 hex digits"),
    ('root ::= ("a"', "expecting ')'"),
    ("root ::= [a-", "unexpected end of input in a character class"),
    ("root ::= *", "expecting an item before"),
    ('root ::= "a"{x}', "expecting an integer"),
    ('root ::= "a"{2', "expecting ','"),
    ('root ::= "a"{2,3', "expecting '}'"),
    ('root ::= "a"{2001}', "a repetition of more than 2000"),
    ('root ::= ("a"{0,100}){0,100}', "a repetition of too many rules"),
    ('root := "a"', "expecting ::= at line 1, column 6"),
    ('\n\nroot ::= "a"\n  bad ::= "b" )', "expecting newline or end at line 4, column 15"),
    ("root ::= <", "expecting '>'"),
    ("root ::= <[1a]>", "expecting ']'"),
]


def test_valid_grammars_pass_and_are_measured() -> None:
    for gbnf in VALID:
        shape = check_gbnf(gbnf)
        assert shape.rules >= 1 and shape.elements >= 2, gbnf


@pytest.mark.parametrize(("gbnf", "reason"), INVALID)
def test_invalid_grammars_are_refused_with_llama_cpps_reason_and_where(gbnf: str, reason: str) -> None:
    assert reason in refused(gbnf)


def test_the_check_agrees_with_llama_cpp(tiny_vocab: Any) -> None:
    for gbnf in VALID:
        assert native_parses(tiny_vocab, gbnf), gbnf
    for gbnf, _ in INVALID:
        if gbnf and "<" not in gbnf:
            assert not native_parses(tiny_vocab, gbnf), gbnf
    assert not native_parses(tiny_vocab, 'x ::= "a"', "root") and "no 'x'" not in refused('x ::= "a"')


_PIECES = [
    '"a"',
    '"b"',
    "[a-c]",
    "[^x]",
    "x",
    "y",
    "root",
    "(",
    ")",
    "|",
    "*",
    "+",
    "?",
    "{2}",
    "{1,3}",
    " ",
    "\n",
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=st.lists(st.sampled_from(_PIECES), max_size=12), defines_x=st.booleans())
def test_random_grammars_are_judged_as_llama_cpp_judges_them(
    tiny_vocab: Any, body: list[str], defines_x: bool
) -> None:
    gbnf = "root ::= " + " ".join(body) + ('\nx ::= y? "z"\ny ::= [q]' if defines_x else "")
    try:
        check_gbnf(gbnf)
    except GrammarSyntaxError:
        ours = False
    else:
        ours = True
    assert ours == native_parses(tiny_vocab, gbnf), gbnf


def test_what_would_hurt_the_process_is_refused_before_llama_cpp() -> None:
    # llama.cpp computes max - min unsigned here and generates rules until memory runs out
    assert "maximum is below its minimum" in refused('root ::= "a"{5,2}')
    # native recursion: deep groups, long chains of leftmost rules
    assert "nested more than" in refused("root ::= " + "(" * 1200 + '"a"' + ")" * 1200)
    chain = "\n".join(f"r{i} ::= r{i + 1}" for i in range(1500))
    assert "more than 1000 deep" in refused(f'root ::= r0\n{chain}\nr1500 ::= "a"')
    # expansion: every repetition is spelled out as rules
    many = "\n".join(f'r{i} ::= "a"{{0,1999}}' for i in range(MAX_ELEMENTS // 1999 + 2))
    assert "more than" in refused(f"root ::= r0\n{many}")
    assert "NUL" in refused('root ::= "a\x00"')
    assert "longer than" in refused("root ::= " + '"a" ' * 70_000)


def test_a_left_recursion_check_that_would_be_exponential_is_bounded() -> None:
    # r_i ::= r_{i+1} r_{i+1}: llama.cpp's check revisits every path (2^n calls)
    rules = "\n".join(f'r{i} ::= r{i + 1}? r{i + 1}? "x"' for i in range(40))
    assert "too intricately" in refused(f'root ::= r0\n{rules}\nr40 ::= "a"')


def test_grammar_value_validates_with_one_line_messages() -> None:
    Grammar('root ::= "a"').validate()
    Grammar('start ::= "a"', root="start").validate()
    Grammar('root ::= "a"', lazy_triggers=["</think>"]).validate()
    assert Grammar('root ::= "a"').after("</think>").lazy_triggers == ("</think>",)
    cases = [
        (Grammar('root ::= "a'), "The grammar is not valid: unexpected end of input"),
        (Grammar('root ::= "a"', root="start"), "no 'start' rule"),
        (Grammar('root ::= "a"', lazy_triggers=("",)), "trigger must be text"),
        (Grammar('root ::= "a"', lazy_triggers=("x",) * 17), "at most 16 triggers"),
        (Grammar(42), "must be text"),  # type: ignore[arg-type]
    ]
    for grammar, message in cases:
        with pytest.raises(InvalidChatRequest, match=message) as info:
            grammar.validate()
        assert "\n" not in info.value.message


# --------------------------------------------------------------------------- languages


def test_json_object_grammar_accepts_objects_only(tiny_vocab: Any) -> None:
    assert native_accepts(tiny_vocab, JSON_OBJECT_GRAMMAR, '{"a": [1, -2.5e3, "x\\n", true, null, {}]}') == (
        True,
        True,
    )
    assert native_accepts(tiny_vocab, JSON_OBJECT_GRAMMAR, "{}") == (True, True)
    assert native_accepts(tiny_vocab, JSON_OBJECT_GRAMMAR, '{"a": ') == (True, False)  # unfinished
    for text in ("[1]", '"x"', '{"a" 1}', "{'a': 1}", "x"):
        assert native_accepts(tiny_vocab, JSON_OBJECT_GRAMMAR, text)[0] is False, text


WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer"},
        "unit": {"enum": ["celsius", "fahrenheit"]},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
    },
    "required": ["city", "unit"],
}


def test_schema_grammar_accepts_instances_and_rejects_others(tiny_vocab: Any) -> None:
    grammar = grammar_from_json_schema(WEATHER)
    good = [
        '{"city": "Paris", "unit": "celsius"}',
        '{"city":"Oslo","unit":"fahrenheit","days":3,"tags":["a","b"]}',
    ]
    for text in good:
        assert native_accepts(tiny_vocab, grammar, text) == (True, True), text
    bad = [
        '{"unit": "celsius"}',  # city is required
        '{"city": 3, "unit": "celsius"}',
        '{"city": "Paris", "unit": "kelvin"}',
        '{"city": "Paris", "days": 1.5, "unit": "celsius"}',
        '{"city": "P", "unit": "celsius", "tags": ["a", "b", "c"]}',
    ]
    for text in bad:
        accepted, complete = native_accepts(tiny_vocab, grammar, text)
        assert not (accepted and complete), text


def test_schema_strings_hold_only_what_json_strings_can(tiny_vocab: Any) -> None:
    # llama.cpp's converter lets control characters (and, in patterns, quotes) into strings
    grammar = grammar_from_json_schema({"type": "object", "properties": {"s": {"type": "string"}}})
    assert native_accepts(tiny_vocab, grammar, '{"s": "a\\n\\u00e9 \u00e9"}') == (True, True)
    assert native_accepts(tiny_vocab, grammar, '{"s": "a\x07')[0] is False
    assert native_accepts(tiny_vocab, grammar, '{"s": "a\n')[0] is False
    patterned = grammar_from_json_schema({"type": "string", "pattern": "^a.b$"})
    assert native_accepts(tiny_vocab, patterned, '"axb"') == (True, True)
    assert native_accepts(tiny_vocab, patterned, '"a"b"')[0] is False
    assert native_accepts(tiny_vocab, patterned, '"a\x01b"')[0] is False


def test_an_empty_schema_allows_any_json_value(tiny_vocab: Any) -> None:
    for schema in ({}, True):
        grammar = grammar_from_json_schema(schema)
        assert native_accepts(tiny_vocab, grammar, "[1, 2]") == (True, True)
        assert native_accepts(tiny_vocab, grammar, '"x"') == (True, True)


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        (
            {"type": "object", "properties": {"x": {"type": "string", "pattern": "abc"}}},
            "#/properties/x must start",
        ),
        (
            {"type": "object", "properties": {"x": {"type": "string", "pattern": "^(?=a)$"}}},
            "cannot be turned into a grammar at #/properties/x: Unsupported pattern syntax",
        ),
        (
            {"type": "object", "properties": {"x": {"type": "strin"}}},
            "unknown type 'strin' at #/properties/x",
        ),
        (
            {"properties": {"tags": {"type": "array", "maxItems": 100000}}},
            "maxItems at #/properties/tags is 100000",
        ),
        ({"type": "array", "minItems": 3, "maxItems": 2}, "at # has a maximum below its minimum"),
        ({"type": "string", "maxLength": -1}, "maxLength at # must be a non-negative integer"),
        ({"anyOf": [{"type": "string"}, 3]}, "non-schema value at #/anyOf/1"),
        ({"$ref": "#/$defs/missing"}, "points to #/$defs/missing, which does not exist"),
        ({"$ref": "https://example.com/s.json"}, "must point inside the schema"),
        ({"items": {"pattern": "^a{1,999}$"}}, "pattern at #/items repeats more than"),
        (["not", "a", "schema"], "must be an object"),
        (False, "allows nothing"),
        ({"type": "object", "properties": {"a/b": {"type": "nope"}}}, "#/properties/a~1b"),
        ({"enum": [float("nan")]}, "not JSON"),
        ({"enum": ["x" * 200_000]}, "longer than"),
    ],
)
def test_schemas_that_cannot_convert_name_the_part(schema: Any, message: str) -> None:
    with pytest.raises(InvalidChatRequest, match=None) as info:
        grammar_from_json_schema(schema)
    assert message in info.value.message
    assert "\n" not in info.value.message


def test_deep_schemas_are_refused_not_recursed() -> None:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(200):
        schema = {"type": "object", "properties": {"a": schema}}
    with pytest.raises(InvalidChatRequest, match="nests too deeply at #/properties/a"):
        grammar_from_json_schema(schema)


def test_refs_inside_the_schema_convert() -> None:
    schema = {
        "$defs": {"city": {"type": "string"}},
        "type": "object",
        "properties": {"c": {"$ref": "#/$defs/city"}},
    }
    grammar = grammar_from_json_schema(schema)
    assert grammar.root == "root" and "c-kv" in grammar.gbnf


# --------------------------------------------------------------------------- SamplingParams


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (SamplingParams(frequency_penalty=2.5), "Frequency penalty must be between -2 and 2"),
        (SamplingParams(presence_penalty=-2.01), "Presence penalty must be between -2 and 2"),
        (SamplingParams(logprobs=MAX_LOGPROBS + 1), "Top logprobs must be between 0 and 20"),
        (SamplingParams(logprobs=-1), "Top logprobs"),
        (SamplingParams(logprobs=True), "Top logprobs"),  # type: ignore[arg-type]
        (SamplingParams(temperature=math.nan), "Temperature must be a number"),
        (SamplingParams(top_p=math.inf), "Top-p must be a number"),
        (SamplingParams(top_k=1.5), "Top-k must be an integer"),  # type: ignore[arg-type]
        (SamplingParams(top_k=2**31), "Top-k must be between 0 and"),
        (SamplingParams(repeat_last_n=10**9), "Repeat window must be between 0 and 1048576"),
        (SamplingParams(seed="7"), "seed must be an integer"),  # type: ignore[arg-type]
        (SamplingParams(grammar='root ::= "a"'), "must be an engine Grammar"),  # type: ignore[arg-type]
        (SamplingParams(grammar=Grammar("root ::= x")), "'x' is used but never defined"),
    ],
)
def test_sampling_params_refuse_out_of_range_values(params: SamplingParams, message: str) -> None:
    with pytest.raises(InvalidChatRequest, match=message):
        params.validate()


def test_sampling_params_accept_openai_ranges() -> None:
    for value in (-2.0, 0.0, 2.0):
        SamplingParams(frequency_penalty=value, presence_penalty=value).validate()
    for n in (0, 5, MAX_LOGPROBS):
        SamplingParams(logprobs=n).validate()
    SamplingParams(grammar=JSON_OBJECT_GRAMMAR, seed=3).validate()
    assert not SamplingParams(repeat_penalty=1.0).penalizes
    assert SamplingParams(repeat_penalty=1.0, presence_penalty=0.5).penalizes
    assert not SamplingParams(repeat_penalty=1.0, presence_penalty=0.5, repeat_last_n=0).penalizes
