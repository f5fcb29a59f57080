"""The question as an FTS5 query: words only, each quoted, OR-ed, stopwords dropped if others remain."""

from __future__ import annotations

import sqlite3

import pytest

from engine.documents.fts_query import MAX_POSTINGS, MAX_TERMS, bounded_query, fts_query, question_terms


def test_words_are_quoted_and_joined_by_or() -> None:
    assert fts_query("How do kangaroos hop?") == '"kangaroos" OR "hop"'


def test_operators_and_punctuation_are_plain_words_or_nothing() -> None:
    assert question_terms('NEAR(x, 2) AND "y" OR z* ^w col:v -u') == [
        "near",
        "x",
        "2",
        "y",
        "z",
        "w",
        "col",
        "v",
        "u",
    ]
    assert fts_query('a"b') == '"b"'  # "a" is a stopword; the quote separates
    assert fts_query("snake_case_name") == '"snake" OR "case" OR "name"'  # unicode61 splits at "_"


def test_stopwords_go_only_while_other_words_remain() -> None:
    assert question_terms("what is the thing") == ["thing"]
    assert question_terms("to be or not to be") == ["to", "be", "or", "not"]


def test_repeats_are_dropped_and_long_questions_capped() -> None:
    assert question_terms("otter Otter OTTER seal") == ["otter", "seal"]
    many = " ".join(f"word{i}" for i in range(100))
    assert len(question_terms(many)) == MAX_TERMS


def test_any_script_is_words_and_symbols_are_not() -> None:
    assert question_terms("Ünïcödé 東京 ١٢٣ 🙂 …") == ["ünïcödé", "東京", "١٢٣"]
    assert fts_query("🙂 ?! ...") == ""


@pytest.mark.parametrize("question", ['"', '""', "NOT", "(", "a OR", "x:", "^", "*", "NEAR(", "\\", "'", "-"])
def test_every_query_made_is_valid_fts5(question: str) -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(text, tokenize='porter unicode61')")
    conn.execute("INSERT INTO t VALUES ('not a single thing')")
    query = fts_query(question + " thing")
    assert conn.execute("SELECT COUNT(*) FROM t WHERE t MATCH ?", (query,)).fetchone()[0] == 1


def test_bounded_query_keeps_the_rarest_words_within_the_postings_cap() -> None:
    counts = {'"common"': 900, '"rare"': 3, '"middling"': 400, '"scarce"': 40}
    asked: list[tuple[str, int]] = []

    def postings(match: str, cap: int) -> int:
        asked.append((match, cap))
        return min(counts[match], cap)

    question = "common middling rare scarce"
    assert bounded_query(question, postings, cap=500) == '"middling" OR "rare" OR "scarce"'  # question order
    assert {cap for _, cap in asked} == {501}  # counting stops past the cap: bounded work per word
    assert bounded_query(question, postings, cap=50) == '"rare" OR "scarce"'
    assert bounded_query(question, postings, cap=2) == ""  # even the rarest matches too much
    assert bounded_query(question, postings, cap=10_000) == fts_query(question)
    assert MAX_POSTINGS == 5000
