"""Grammars that constrain what a request may generate: a GBNF text (checked here, in
Python, before llama.cpp parses it), JSON schemas converted to GBNF, and any JSON object.

Pure Python apart from ``grammar_from_json_schema``, which imports llama-cpp-python's
pure-Python converter (``llama_cpp.llama_grammar``) when it is called.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from engine.base.errors import InvalidChatRequest
from engine.sampling.gbnf import GrammarSyntaxError, check_gbnf

MAX_TRIGGERS = 16
MAX_TRIGGER_CHARS = 256
MAX_SCHEMA_CHARS = 128 * 1024
MAX_SCHEMA_COUNT = 256  # minItems/maxItems/minLength/maxLength/{m,n}: each is spelled out in GBNF
MAX_SCHEMA_DEPTH = 64


@dataclass(frozen=True)
class Grammar:
    """A GBNF grammar for one request's output.

    With ``lazy_triggers`` the grammar constrains nothing until the output contains one
    of those strings; from there it constrains what follows the trigger (the trigger
    itself is not part of the grammar's text). Used to start a JSON grammar after a
    reasoning model's ``</think>``. Whitespace that follows the trigger inside the same
    token is left out of what the grammar sees.
    """

    gbnf: str
    root: str = "root"
    lazy_triggers: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "lazy_triggers", tuple(self.lazy_triggers))

    @property
    def lazy(self) -> bool:
        return bool(self.lazy_triggers)

    def after(self, *triggers: str) -> Grammar:
        """This grammar, starting only once one of ``triggers`` has been generated."""
        return Grammar(self.gbnf, self.root, tuple(triggers))

    def validate(self) -> None:
        """Raise ``InvalidChatRequest`` naming what llama.cpp would refuse (or choke on)."""
        if not isinstance(self.gbnf, str) or not isinstance(self.root, str):
            raise InvalidChatRequest("A grammar must be text.")
        if len(self.lazy_triggers) > MAX_TRIGGERS:
            raise InvalidChatRequest(f"A grammar may have at most {MAX_TRIGGERS} triggers.")
        for trigger in self.lazy_triggers:
            if not isinstance(trigger, str) or not trigger or len(trigger) > MAX_TRIGGER_CHARS:
                raise InvalidChatRequest(
                    f"A grammar trigger must be text of 1 to {MAX_TRIGGER_CHARS} characters."
                )
        try:
            check_gbnf(self.gbnf, self.root)
        except GrammarSyntaxError as exc:
            raise InvalidChatRequest(f"The grammar is not valid: {exc}.") from None


# Any JSON object (response_format json_object). llama.cpp's grammars/json.gbnf, with the
# whitespace after a value bounded so a model cannot run away in spaces.
JSON_OBJECT_GRAMMAR = Grammar(
    r"""root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ( "," ws string ":" ws value )* )? "}" ws
array  ::= "[" ws ( value ( "," ws value )* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\"" ws
number ::= ( "-"? ( [0-9] | [1-9] [0-9]{0,15} ) ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9] [1-9]{0,15} )? ws
ws     ::= | " " | "\n" [ \t]{0,20}
"""
)


# --------------------------------------------------------------------------- JSON schema


def _pointer(parts: tuple[str | int, ...]) -> str:
    escaped = (str(p).replace("~", "~0").replace("/", "~1") for p in parts)
    return "#" + "".join("/" + p for p in escaped)


def _subschemas(schema: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[Any, tuple[str | int, ...]]]:
    """Every schema object under ``schema`` with its path (depth-first, iteratively)."""
    stack = [(schema, path)]
    while stack:
        node, where = stack.pop()
        yield node, where
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("properties", "$defs", "definitions", "patternProperties") and isinstance(
                    value, dict
                ):
                    stack.extend((v, (*where, key, k)) for k, v in value.items())
                elif key in ("items", "additionalProperties", "not", "contains") and isinstance(value, dict):
                    stack.append((value, (*where, key)))
                elif key in ("items", "prefixItems", "anyOf", "oneOf", "allOf") and isinstance(value, list):
                    stack.extend((v, (*where, key, i)) for i, v in enumerate(value))


_COUNT_KEYS = ("minItems", "maxItems", "minLength", "maxLength")
_QUANTIFIER = re.compile(r"\{\s*(\d*)\s*(?:,\s*(\d*)\s*)?\}")
_KNOWN_TYPES = frozenset({"boolean", "number", "integer", "string", "null", "object", "array"})


def precheck_json_schema(schema: Any) -> None:
    """What the converter would choke on (or expand beyond reason), named by JSON pointer."""
    if isinstance(schema, bool):
        return
    if not isinstance(schema, dict):
        raise InvalidChatRequest("The JSON schema must be an object.")
    for node, where in _subschemas(schema):
        if len(where) > MAX_SCHEMA_DEPTH * 2:
            raise InvalidChatRequest(f"The JSON schema nests too deeply at {_pointer(where)}.")
        if not isinstance(node, dict):
            if isinstance(node, bool):
                continue
            raise InvalidChatRequest(f"The JSON schema has a non-schema value at {_pointer(where)}.")
        for key in _COUNT_KEYS:
            if key in node:
                value = node[key]
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise InvalidChatRequest(
                        f"The JSON schema's {key} at {_pointer(where)} must be a non-negative integer."
                    )
                if value > MAX_SCHEMA_COUNT:
                    raise InvalidChatRequest(
                        f"The JSON schema's {key} at {_pointer(where)} is {value}; structured output "
                        f"supports at most {MAX_SCHEMA_COUNT}."
                    )
        low, high = node.get("minItems", node.get("minLength")), node.get("maxItems", node.get("maxLength"))
        if isinstance(low, int) and isinstance(high, int) and high < low:
            raise InvalidChatRequest(f"The JSON schema at {_pointer(where)} has a maximum below its minimum.")
        kind = node.get("type")
        kinds = kind if isinstance(kind, list) else [kind] if kind is not None else []
        for k in kinds:
            if k not in _KNOWN_TYPES:
                raise InvalidChatRequest(f"The JSON schema has an unknown type {k!r} at {_pointer(where)}.")
        pattern = node.get("pattern")
        if pattern is not None:
            if not isinstance(pattern, str):
                raise InvalidChatRequest(f"The JSON schema's pattern at {_pointer(where)} must be text.")
            if not (pattern.startswith("^") and pattern.endswith("$")):
                raise InvalidChatRequest(
                    f"The JSON schema's pattern at {_pointer(where)} must start with ^ and end with $."
                )
            for match in _QUANTIFIER.finditer(pattern):
                numbers = [int(n) for n in match.groups() if n]
                if any(n > MAX_SCHEMA_COUNT for n in numbers):
                    raise InvalidChatRequest(
                        f"The JSON schema's pattern at {_pointer(where)} repeats more than "
                        f"{MAX_SCHEMA_COUNT} times."
                    )
        ref = node.get("$ref")
        if ref is not None:
            if not isinstance(ref, str) or not ref.startswith("#/"):
                raise InvalidChatRequest(
                    f"The JSON schema's $ref at {_pointer(where)} must point inside the schema (#/...)."
                )
            target: Any = schema
            for part in ref[2:].split("/"):
                key = part.replace("~1", "/").replace("~0", "~")
                if isinstance(target, dict) and key in target:
                    target = target[key]
                elif isinstance(target, list) and key.isdigit() and int(key) < len(target):
                    target = target[int(key)]
                else:
                    raise InvalidChatRequest(
                        f"The JSON schema's $ref at {_pointer(where)} points to {ref}, which does not exist."
                    )


def grammar_from_json_schema(schema: Any) -> Grammar:
    """A grammar for JSON matching ``schema`` (a JSON schema as Python values), converted
    by llama.cpp's own converter. A schema it cannot convert raises ``InvalidChatRequest``
    naming the part by JSON pointer (``#/properties/x``)."""
    precheck_json_schema(schema)
    if schema is True or schema == {}:
        return _any_value()
    if schema is False:
        raise InvalidChatRequest("The JSON schema false allows nothing.")
    grammar = Grammar(convert_json_schema(schema))
    grammar.validate()
    return grammar


def convert_json_schema(schema: Any, prop_order: tuple[str, ...] = ()) -> str:
    """GBNF (root rule ``root``) for ``schema``, checked with ``precheck_json_schema``;
    properties named in ``prop_order`` come first, in that order."""
    precheck_json_schema(schema)
    try:
        text = json.dumps(schema, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidChatRequest(f"The JSON schema is not JSON: {exc}.") from None
    if len(text) > MAX_SCHEMA_CHARS:
        raise InvalidChatRequest(f"The JSON schema is longer than {MAX_SCHEMA_CHARS // 1024} KiB.")
    return _convert(json.loads(text), prop_order)


def _any_value() -> Grammar:
    gbnf = JSON_OBJECT_GRAMMAR.gbnf.replace("root   ::= object", "root   ::= value", 1)
    return Grammar(gbnf)


# This converter's string characters (``char``, and ``dot`` for patterns) allow control
# characters and, for ``dot``, quotes: text JSON cannot hold unescaped. Newer llama.cpp
# excludes them as json.gbnf does; so does Hearth.
_CHAR_RULE = '\nchar ::= [^"\\\\] |'
_JSON_CHAR_RULE = '\nchar ::= [^"\\\\\\x7F\\x00-\\x1F] |'
_DOT_RULE = "\ndot ::= [^\\x0A\\x0D]"
_JSON_DOT_RULE = '\ndot ::= [^"\\\\\\x7F\\x00-\\x1F]'


def _json_strings_only(gbnf: str) -> str:
    text = "\n" + gbnf
    return text.replace(_CHAR_RULE, _JSON_CHAR_RULE).replace(_DOT_RULE, _JSON_DOT_RULE)[1:]


def _convert(schema: dict[str, Any], prop_order: tuple[str, ...] = ()) -> str:
    """Run llama.cpp's SchemaConverter, noting which subschema each failure came from."""
    from llama_cpp.llama_grammar import SchemaConverter

    paths: dict[int, tuple[str | int, ...]] = {id(node): where for node, where in _subschemas(schema)}

    class _Tracking(SchemaConverter):  # type: ignore[misc]
        failed_at: tuple[str | int, ...] | None = None

        def visit(self, node: Any, name: str) -> Any:
            try:
                if not isinstance(node, dict):
                    raise ValueError("a schema must be an object")
                return super().visit(node, name)
            except Exception:
                if self.failed_at is None:
                    self.failed_at = paths.get(id(node), ())
                raise

    order = {name: index for index, name in enumerate(prop_order)}
    converter = _Tracking(prop_order=order, allow_fetch=False, dotall=False, raw_pattern=False)
    try:
        resolved = converter.resolve_refs(schema, "input")
        converter.visit(resolved, "")
        return _json_strings_only(converter.format_grammar())
    except RecursionError:
        where = converter.failed_at or ()
        raise InvalidChatRequest(f"The JSON schema nests too deeply at {_pointer(where)}.") from None
    except Exception as exc:  # the converter reports with assert/ValueError/KeyError/TypeError
        where = converter.failed_at or ()
        reason = " ".join(str(exc).split()) or type(exc).__name__
        if len(reason) > 160:
            reason = reason[:159] + "…"
        raise InvalidChatRequest(
            f"The JSON schema cannot be turned into a grammar at {_pointer(where)}: {reason}."
        ) from None
