"""BERT's normalizer and WordPiece's word limit, applied before llama.cpp tokenizes."""

from __future__ import annotations

import pytest

from engine.documents.bert_text import MAX_WORD_CHARS, BertText

BERT = BertText()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Hello World", "hello world"),
        ("Café Ångström naïve", "cafe angstrom naive"),
        ("ΟΔΟΣ", "οδοσ"),  # each character on its own: no final-sigma rule
        ("İstanbul", "istanbul"),  # the dot above is a mark, stripped before lowercasing
        ("한국어", "\u1112\u1161\u11ab\u1100\u116e\u11a8\u110b\u1165"),  # decomposed into jamo
        ("ﬁ ＡＢＣ", "ﬁ ａｂｃ"),  # NFD leaves compatibility characters alone
    ],
)
def test_normalize_as_bert(text: str, expected: str) -> None:
    assert BERT.normalize(text) == expected


def test_settings_are_honoured() -> None:
    assert BertText(lowercase=False, strip_accents=False).normalize("Café") == "Café"
    assert BertText(lowercase=True, strip_accents=False).normalize("Café") == "café"
    assert BertText(lowercase=False, strip_accents=True).normalize("Café") == "Cafe"


def test_text_without_long_words_is_one_piece() -> None:
    text = "a " * 1000 + "b" * MAX_WORD_CHARS
    assert list(BERT.pieces(text)) == [text]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("sha " + "f" * 128 + " ok", ["sha ", None, " ok"]),
        ("x" * 101, [None]),
        ("x" * 150 + ".y", [None, ".y"]),  # punctuation ends the word
        ("東" + "a" * 150 + "京", ["東", None, "京"]),  # so does a CJK character
        ("go " + "a" * 60 + "©" + "b" * 60 + " stop", ["go ", None, " stop"]),  # © stays in the word
        ("a" * 200 + " " + "b" * 200, [None, " ", None]),
        ("_" + "a" * 120, ["_", None]),  # underscore is BERT punctuation
    ],
)
def test_over_long_words_stand_for_unk(text: str, expected: list[str | None]) -> None:
    assert list(BERT.pieces(text)) == expected


def test_pieces_cover_the_text_in_order() -> None:
    text = "start " + "q" * 300 + ", middle " + "r" * 101 + " end"
    pieces = list(BERT.pieces(text))
    assert "".join(p for p in pieces if p is not None) == "start , middle  end"
    assert pieces.count(None) == 2
