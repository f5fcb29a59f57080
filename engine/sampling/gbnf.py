"""GBNF grammars checked in Python before llama.cpp sees them.

``llama_sampler_init_grammar`` returns NULL for a grammar it cannot parse, but it prints
the reason to stderr (not through the log callback), and a few grammars it accepts would
hurt the process: ``x{5,2}`` makes its parser generate rules until memory runs out, deep
nesting recurses natively without bound, and the left-recursion check it runs at init is
exponential on some rule graphs. ``check_gbnf`` is a faithful port of the parser in
``vendor/llama.cpp/src/llama-grammar.cpp`` (0.3.36: ``llama_grammar_parser::parse``,
``handle_repetitions``, ``llama_grammar_detect_left_recursion``) that builds the same rules,
refuses what llama.cpp refuses with its reason and the line and column, and refuses what
would be unsafe. Pure Python: imports neither llama.cpp nor Qt.
"""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass

MAX_GRAMMAR_CHARS = 256 * 1024
MAX_REPETITION = 2000  # llama-grammar.cpp MAX_REPETITION_THRESHOLD
MAX_ELEMENTS = 200_000  # rule elements after repetitions are expanded
MAX_NESTING = 1000  # parenthesised groups inside one another (native recursion)
MAX_LEFT_DEPTH = 1000  # rules reached through leftmost references (native recursion)
MAX_ANALYSIS_STEPS = 200_000  # calls llama.cpp's left-recursion check would make


class GrammarSyntaxError(ValueError):
    """A grammar llama.cpp would refuse, or that is unsafe to hand it; ``str`` is one line."""


class _T(enum.IntEnum):
    """llama_gretype."""

    END = 0
    ALT = 1
    RULE_REF = 2
    CHAR = 3
    CHAR_NOT = 4
    CHAR_RNG_UPPER = 5
    CHAR_ALT = 6
    CHAR_ANY = 7
    TOKEN = 8
    TOKEN_NOT = 9


@dataclass(frozen=True)
class GrammarShape:
    """What a checked grammar expands to (for tests and diagnostics)."""

    rules: int
    elements: int
    left_depth: int


_Element = tuple[_T, int]


def _is_word_char(c: str) -> bool:
    return ("a" <= c <= "z") or ("A" <= c <= "Z") or c == "-" or ("0" <= c <= "9")


class _Parser:
    def __init__(self, src: str) -> None:
        self.src = src
        self.symbol_ids: dict[str, int] = {}
        self.rules: list[list[_Element] | None] = []
        self.elements = 0

    # -- errors ----------------------------------------------------------------------

    def fail(self, what: str, pos: int) -> GrammarSyntaxError:
        line = self.src.count("\n", 0, pos) + 1
        column = pos - (self.src.rfind("\n", 0, pos) + 1) + 1
        return GrammarSyntaxError(f"{what} at line {line}, column {column}")

    def at(self, pos: int) -> str:
        return self.src[pos] if pos < len(self.src) else ""

    # -- lexing (parse_space, parse_name, parse_int, parse_char, parse_token) ----------

    def space(self, pos: int, newline_ok: bool) -> int:
        src, n = self.src, len(self.src)
        while pos < n and (src[pos] in " \t#" or (newline_ok and src[pos] in "\r\n")):
            if src[pos] == "#":
                while pos < n and src[pos] not in "\r\n":
                    pos += 1
            else:
                pos += 1
        return pos

    def name(self, pos: int) -> int:
        end = pos
        while _is_word_char(self.at(end)):
            end += 1
        if end == pos:
            raise self.fail("expecting a rule name", pos)
        return end

    def integer(self, pos: int) -> int:
        end = pos
        while self.at(end).isdigit() and self.at(end).isascii():
            end += 1
        if end == pos:
            raise self.fail("expecting an integer", pos)
        return end

    def hex(self, pos: int, size: int) -> tuple[int, int]:
        text = self.src[pos : pos + size]
        if len(text) != size or any(c not in "0123456789abcdefABCDEF" for c in text):
            raise self.fail(f"expecting {size} hex digits", pos)
        return int(text, 16), pos + size

    def char(self, pos: int) -> tuple[int, int]:
        c = self.at(pos)
        if c == "\\":
            e = self.at(pos + 1)
            if e == "x":
                return self.hex(pos + 2, 2)
            if e == "u":
                return self.hex(pos + 2, 4)
            if e == "U":
                return self.hex(pos + 2, 8)
            simple = {"t": "\t", "r": "\r", "n": "\n", "\\": "\\", '"': '"', "[": "[", "]": "]", "-": "-"}
            if e in simple:
                return ord(simple[e]), pos + 2
            raise self.fail("unknown escape", pos)
        if c:
            return ord(c), pos + 1
        raise self.fail("unexpected end of input", pos)

    def token(self, pos: int) -> tuple[int, int]:
        start = pos
        if self.at(pos) != "<":
            raise self.fail("expecting '<'", pos)
        pos += 1
        if self.at(pos) == "[":
            pos += 1
            end = self.integer(pos)
            value = int(self.src[pos:end])
            if value > 0xFFFFFFFF:
                raise self.fail("token id too big", pos)
            if self.at(end) != "]":
                raise self.fail("expecting ']'", end)
            if self.at(end + 1) != ">":
                raise self.fail("expecting '>'", end + 1)
            return value, end + 2
        end = self.src.find(">", pos)
        if end < 0:
            raise self.fail("expecting '>'", len(self.src))
        if end == pos:
            raise self.fail("empty token reference", start)
        return -1, end + 1  # llama.cpp tokenizes the text; it must be exactly one token

    # -- rules -------------------------------------------------------------------------

    def symbol(self, name: str) -> int:
        return self.symbol_ids.setdefault(name, len(self.symbol_ids))

    def generate_symbol(self, base: str) -> int:
        next_id = len(self.symbol_ids)
        self.symbol_ids[f"{base}_{next_id}"] = next_id
        return next_id

    def add_rule(self, rule_id: int, rule: list[_Element]) -> None:
        if len(self.rules) <= rule_id:
            self.rules.extend([None] * (rule_id + 1 - len(self.rules)))
        old = self.rules[rule_id]
        self.elements += len(rule) - (len(old) if old else 0)
        if self.elements > MAX_ELEMENTS:
            raise GrammarSyntaxError(
                f"the grammar expands to more than {MAX_ELEMENTS:,} elements (repetitions included)"
            )
        self.rules[rule_id] = rule

    def parse(self) -> None:
        pos = self.space(0, True)
        while pos < len(self.src):
            pos = self.rule(pos)

    def rule(self, pos: int) -> int:
        name_end = self.name(pos)
        name = self.src[pos:name_end]
        rule_id = self.symbol(name)
        after = self.space(name_end, False)
        if self.src[after : after + 3] != "::=":
            raise self.fail("expecting ::=", after)
        pos = self.alternates(self.space(after + 3, True), name, rule_id)
        c = self.at(pos)
        if c == "\r":
            pos += 2 if self.at(pos + 1) == "\n" else 1
        elif c == "\n":
            pos += 1
        elif c:
            raise self.fail("expecting newline or end", pos)
        return self.space(pos, True)

    def alternates(self, pos: int, rule_name: str, rule_id: int) -> int:
        """parse_alternates/parse_sequence for one rule, its groups on an explicit stack."""
        stack: list[_Frame] = [_Frame(rule_id, nested=False)]
        while True:
            frame = stack[-1]
            pos = self.sequence(pos, rule_name, frame, stack)
            if len(stack) > MAX_NESTING:
                raise self.fail(f"groups nested more than {MAX_NESTING} deep", pos)
            if stack[-1] is not frame:
                continue  # a group opened: parse inside it
            if self.at(pos) == "|":
                frame.rule.append((_T.ALT, 0))
                pos = self.space(pos + 1, True)
                frame.last_sym_start = len(frame.rule)
                frame.n_prev_rules = 1
                continue
            frame.rule.append((_T.END, 0))
            self.add_rule(frame.rule_id, frame.rule)
            stack.pop()
            if not stack:
                return pos
            parent = stack[-1]
            parent.n_prev_rules = max(1, len(self.symbol_ids) - frame.n_rules_before)
            parent.last_sym_start = len(parent.rule)
            parent.rule.append((_T.RULE_REF, frame.rule_id))
            if self.at(pos) != ")":
                raise self.fail("expecting ')'", pos)
            pos = self.space(pos + 1, parent.nested)

    def sequence(self, pos: int, rule_name: str, frame: _Frame, stack: list[_Frame]) -> int:
        rule = frame.rule
        nested = frame.nested
        while pos < len(self.src):
            c = self.src[pos]
            if c == '"':
                pos += 1
                frame.last_sym_start = len(rule)
                frame.n_prev_rules = 1
                while self.at(pos) != '"':
                    if not self.at(pos):
                        raise self.fail("unexpected end of input in a string", pos)
                    value, pos = self.char(pos)
                    rule.append((_T.CHAR, value))
                pos = self.space(pos + 1, nested)
            elif c == "[":
                pos += 1
                start_type = _T.CHAR
                if self.at(pos) == "^":
                    pos += 1
                    start_type = _T.CHAR_NOT
                frame.last_sym_start = len(rule)
                frame.n_prev_rules = 1
                while self.at(pos) != "]":
                    if not self.at(pos):
                        raise self.fail("unexpected end of input in a character class", pos)
                    value, pos = self.char(pos)
                    kind = _T.CHAR_ALT if frame.last_sym_start < len(rule) else start_type
                    rule.append((kind, value))
                    if self.at(pos) == "-" and self.at(pos + 1) != "]":
                        if not self.at(pos + 1):
                            raise self.fail("unexpected end of input in a character class", pos)
                        upper, pos = self.char(pos + 1)
                        rule.append((_T.CHAR_RNG_UPPER, upper))
                pos = self.space(pos + 1, nested)
            elif c in "<!":
                kind = _T.TOKEN
                if c == "!":
                    kind = _T.TOKEN_NOT
                    pos += 1
                value, pos = self.token(pos)
                frame.last_sym_start = len(rule)
                frame.n_prev_rules = 1
                rule.append((kind, value))
                pos = self.space(pos, nested)
            elif _is_word_char(c):
                end = self.name(pos)
                ref = self.symbol(self.src[pos:end])
                pos = self.space(end, nested)
                frame.last_sym_start = len(rule)
                frame.n_prev_rules = 1
                rule.append((_T.RULE_REF, ref))
            elif c == "(":
                pos = self.space(pos + 1, True)
                n_rules_before = len(self.symbol_ids)
                group = _Frame(self.generate_symbol(rule_name), nested=True, n_rules_before=n_rules_before)
                stack.append(group)
                return pos
            elif c == ".":
                frame.last_sym_start = len(rule)
                frame.n_prev_rules = 1
                rule.append((_T.CHAR_ANY, 0))
                pos = self.space(pos + 1, nested)
            elif c in "*+?":
                at = pos
                pos = self.space(pos + 1, nested)
                low, high = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
                self.repeat(frame, rule_name, low, high, at)
            elif c == "{":
                at = pos
                pos = self.space(pos + 1, nested)
                if not (self.at(pos).isdigit() and self.at(pos).isascii()):
                    raise self.fail("expecting an integer", pos)
                end = self.integer(pos)
                low = int(self.src[pos:end])
                pos = self.space(end, nested)
                high: int | None = None
                if self.at(pos) == "}":
                    high = low
                    pos = self.space(pos + 1, nested)
                elif self.at(pos) == ",":
                    pos = self.space(pos + 1, nested)
                    if self.at(pos).isdigit() and self.at(pos).isascii():
                        end = self.integer(pos)
                        high = int(self.src[pos:end])
                        pos = self.space(end, nested)
                    if self.at(pos) != "}":
                        raise self.fail("expecting '}'", pos)
                    pos = self.space(pos + 1, nested)
                else:
                    raise self.fail("expecting ','", pos)
                if low > MAX_REPETITION:
                    raise self.fail(f"a repetition of more than {MAX_REPETITION}", at)
                if high is not None and high > MAX_REPETITION:
                    high = None  # llama.cpp drops a maximum above its threshold
                if high is not None and high < low:
                    # llama.cpp computes max - min unsigned and generates rules until memory runs out.
                    raise self.fail(f"a repetition {{{low},{high}}} whose maximum is below its minimum", at)
                self.repeat(frame, rule_name, low, high, at)
            else:
                break
        return pos

    def repeat(self, frame: _Frame, rule_name: str, low: int, high: int | None, at: int) -> None:
        """handle_repetitions: expand the last item ``low`` to ``high`` times."""
        rule = frame.rule
        if frame.last_sym_start == len(rule):
            raise self.fail("expecting an item before */+/?/{", at)
        prev_rule = rule[frame.last_sym_start :]
        total = high if (high is not None and high > 0) else (low if low > 0 else 1)
        if frame.n_prev_rules * total > MAX_REPETITION:
            raise self.fail("a repetition of too many rules (nested repetitions multiply)", at)
        if (low - 1) * len(prev_rule) + self.elements > MAX_ELEMENTS:
            raise GrammarSyntaxError(f"the grammar expands to more than {MAX_ELEMENTS:,} elements")
        if low == 0:
            del rule[frame.last_sym_start :]
        else:
            for _ in range(1, low):
                rule.extend(prev_rule)
        n_opt = 1 if high is None else high - low
        last_rec_rule_id = 0
        for i in range(n_opt):
            rec_rule = list(prev_rule)
            rec_rule_id = self.generate_symbol(rule_name)
            if i > 0 or high is None:
                rec_rule.append((_T.RULE_REF, rec_rule_id if high is None else last_rec_rule_id))
            rec_rule += [(_T.ALT, 0), (_T.END, 0)]
            self.add_rule(rec_rule_id, rec_rule)
            last_rec_rule_id = rec_rule_id
        if n_opt > 0:
            rule.append((_T.RULE_REF, last_rec_rule_id))
        frame.n_prev_rules *= total


@dataclass(eq=False)
class _Frame:
    rule_id: int
    nested: bool
    n_rules_before: int = 0

    def __post_init__(self) -> None:
        self.rule: list[_Element] = []
        self.last_sym_start = 0
        self.n_prev_rules = 1


def _end_of_sequence(element: _Element) -> bool:
    return element[0] in (_T.END, _T.ALT)


def _left_recursion(rules: list[list[_Element]]) -> tuple[int | None, int]:
    """llama_grammar_detect_left_recursion over every rule, as llama.cpp runs it, without
    native recursion: the first left-recursive rule (or None) and the deepest chain."""
    n = len(rules)
    visited = [False] * n
    in_progress = [False] * n
    may_be_empty = [False] * n
    steps = 0
    deepest = 0

    for start in range(n):
        if visited[start]:
            continue
        # frames: [rule index, element index, recurse flag, child awaited or -1]
        stack: list[list[int]] = []

        def enter(index: int, stack: list[list[int]] = stack) -> bool:
            if in_progress[index]:
                return True
            in_progress[index] = True
            at_start = True
            for element in rules[index]:
                if _end_of_sequence(element):
                    if at_start:
                        may_be_empty[index] = True
                        break
                    at_start = True
                else:
                    at_start = False
            stack.append([index, 0, 1, -1])
            return False

        if enter(start):
            return start, deepest
        while stack:
            deepest = max(deepest, len(stack))
            if deepest > MAX_LEFT_DEPTH:
                raise GrammarSyntaxError(
                    f"the grammar nests rules more than {MAX_LEFT_DEPTH} deep at the start of a rule"
                )
            frame = stack[-1]
            rule = rules[frame[0]]
            if frame[3] >= 0:
                if not may_be_empty[frame[3]]:
                    frame[2] = 0
                frame[3] = -1
                frame[1] += 1
            descended = False
            while frame[1] < len(rule):
                kind, value = rule[frame[1]]
                if kind is _T.RULE_REF and frame[2]:
                    steps += 1
                    if steps > MAX_ANALYSIS_STEPS:
                        raise GrammarSyntaxError("the grammar's rules reference each other too intricately")
                    frame[3] = value
                    if enter(value):
                        return value, deepest
                    descended = True
                    break
                frame[2] = 1 if kind in (_T.END, _T.ALT) else 0
                frame[1] += 1
            if descended:
                continue
            in_progress[frame[0]] = False
            visited[frame[0]] = True
            stack.pop()
    return None, deepest


@functools.lru_cache(maxsize=64)
def check_gbnf(gbnf: str, root: str = "root") -> GrammarShape:
    """Parse ``gbnf`` as llama.cpp would; raise ``GrammarSyntaxError`` (one line) for a
    grammar llama.cpp would refuse or that is unsafe to give it."""
    if not gbnf.strip():
        raise GrammarSyntaxError("the grammar is empty")
    if len(gbnf) > MAX_GRAMMAR_CHARS:
        raise GrammarSyntaxError(f"the grammar is longer than {MAX_GRAMMAR_CHARS // 1024} KiB")
    if "\x00" in gbnf or "\x00" in root:
        raise GrammarSyntaxError("the grammar contains a NUL character")
    parser = _Parser(gbnf)
    parser.parse()
    names = {index: name for name, index in parser.symbol_ids.items()}
    rules = parser.rules
    for index in range(len(parser.symbol_ids)):
        if index >= len(rules) or not rules[index]:
            raise GrammarSyntaxError(f"the rule '{names.get(index, index)}' is used but never defined")
    if root not in parser.symbol_ids:
        raise GrammarSyntaxError(f"the grammar has no '{root}' rule")
    complete: list[list[_Element]] = [r for r in rules if r]
    recursive, depth = _left_recursion(complete)
    if recursive is not None:
        raise GrammarSyntaxError(f"the rule '{names.get(recursive, recursive)}' is left-recursive")
    return GrammarShape(len(complete), parser.elements, depth)
