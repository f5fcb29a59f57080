"""The retrieval test set holds what it claims: enough real documents in every format, enough
questions of every kind, and every answer's evidence on the file and page it names."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest

from tests.engine.documents import corpus_fixture, make_corpus
from tests.engine.documents.corpus_fixture import build_corpus, corpus_key, document_corpus
from tests.engine.documents.corpus_questions import (
    Answer,
    Question,
    QuestionKind,
    load_manifest,
    load_questions,
)
from tests.engine.documents.corpus_text import normalised, page_texts, pdf_page_count

__all__ = ["document_corpus"]  # the fixture, imported so that pytest finds it here

QUESTIONS = load_questions()
MANIFEST = {document.file: document for document in load_manifest()}
FORMATS = (".md", ".txt", ".py", ".rs", ".sh", ".html", ".pdf", ".docx")


@pytest.fixture(scope="module")
def texts(document_corpus: Path) -> dict[str, dict[int | None, str]]:
    return {
        path.name: {page: normalised(text) for page, text in page_texts(path).items()}
        for path in document_corpus.iterdir()
    }


def test_the_folder_holds_exactly_the_documents_of_the_manifest(document_corpus: Path) -> None:
    assert sorted(p.name for p in document_corpus.iterdir()) == sorted(MANIFEST)
    assert all(p.is_file() and p.stat().st_size > 0 for p in document_corpus.iterdir())


def test_there_are_twenty_documents_in_every_format() -> None:
    suffixes = Counter(Path(name).suffix for name in MANIFEST)
    assert len(MANIFEST) >= 20
    assert set(FORMATS) <= set(suffixes)
    assert suffixes[".pdf"] >= 4
    assert suffixes[".docx"] >= 3


def test_every_document_has_500_to_3000_words(texts: dict[str, dict[int | None, str]]) -> None:
    words = {name: sum(len(text.split()) for text in pages.values()) for name, pages in texts.items()}
    assert {name: n for name, n in words.items() if not 500 <= n <= 3000} == {}


def test_the_pdfs_have_the_pages_the_manifest_claims(document_corpus: Path) -> None:
    for name, document in MANIFEST.items():
        if name.endswith(".pdf"):
            assert document.pages is not None and 4 <= document.pages <= 12, name
            assert pdf_page_count(document_corpus / name) == document.pages, name
        else:
            assert document.pages is None, name


def test_the_pdfs_are_fpdf2s_with_a_text_layer_on_every_page(
    document_corpus: Path, texts: dict[str, dict[int | None, str]]
) -> None:
    import pypdfium2

    for name in (n for n in MANIFEST if n.endswith(".pdf")):
        pdf = pypdfium2.PdfDocument(document_corpus / name)
        try:
            assert "fpdf2" in pdf.get_metadata_dict()["Producer"], name
        finally:
            pdf.close()
        # Each page says which it is, so a page number in a test failure can be checked by eye.
        pages = texts[name]
        for number, text in pages.items():
            assert f"page {number} of {len(pages)}" in text, (name, number)
            assert len(text.split()) > 100, (name, number)


def test_the_docxs_have_headings_paragraphs_and_a_table(document_corpus: Path) -> None:
    import docx

    for name in (n for n in MANIFEST if n.endswith(".docx")):
        document = docx.Document(str(document_corpus / name))
        styles = Counter(p.style.name for p in document.paragraphs)
        assert styles["Title"] == 1, name
        assert styles["Heading 1"] >= 3 and styles["Heading 2"] >= 1, name
        assert styles["Normal"] >= 10, name
        assert len(document.tables) >= 1, name
        assert document.core_properties.title, name


def test_there_are_forty_questions_of_every_kind() -> None:
    kinds = Counter(q.kind for q in QUESTIONS)
    assert len(QUESTIONS) >= 40
    assert all(kinds[kind] >= 5 for kind in QuestionKind), kinds
    assert all(q.question.strip() and q.id for q in QUESTIONS)


def test_every_answer_names_a_document_and_a_page_it_has() -> None:
    for question in QUESTIONS:
        for answer in question.answers:
            document = MANIFEST[answer.file]
            if document.pages is None:
                assert answer.page is None, question.id
            else:
                assert answer.page is not None and 1 <= answer.page <= document.pages, question.id


def test_every_document_answers_a_question() -> None:
    answered = {answer.file for question in QUESTIONS for answer in question.answers}
    assert set(MANIFEST) - answered == set()


@pytest.mark.parametrize("question", QUESTIONS, ids=[q.id for q in QUESTIONS])
def test_the_evidence_is_on_the_page_named_and_no_other(
    question: Question, texts: dict[str, dict[int | None, str]]
) -> None:
    for answer in question.answers:
        pages = texts[answer.file]
        evidence = normalised(answer.evidence)
        assert len(evidence) >= 12, "evidence too short to prove anything"
        assert evidence in pages[answer.page], (answer.file, answer.page, evidence)
        # On another page too, and the page named would be a guess: list that page as well.
        others = [page for page, text in pages.items() if page != answer.page and evidence in text]
        listed = {a.page for a in question.answers if a.file == answer.file}
        assert set(others) <= listed, (answer.file, others)


def test_a_question_is_answered_by_its_file_at_its_page_or_anywhere_when_paged_none() -> None:
    question = Question(
        "x",
        "?",
        QuestionKind.FACTUAL,
        (Answer("manual.pdf", 3, "on page three"), Answer("notes.md", None, "in the notes")),
    )
    assert question.is_answered_by("manual.pdf", 3)
    assert not question.is_answered_by("manual.pdf", 4)
    assert not question.is_answered_by("other.pdf", 3)
    assert question.is_answered_by("notes.md", None)
    assert not question.is_answered_by("manual.md", None)


def test_questions_with_repeated_ids_or_no_answer_are_refused(tmp_path: Path) -> None:
    one = '{"id": "a", "question": "?", "kind": "keyword", "answers": [%s]}'
    answer = '{"file": "f.md", "page": null, "evidence": "e"}'
    (tmp_path / "twice.json").write_text(f"[{one % answer}, {one % answer}]")
    with pytest.raises(ValueError, match="ids repeat"):
        load_questions(tmp_path / "twice.json")
    (tmp_path / "none.json").write_text(f"[{one % ''}]")
    with pytest.raises(ValueError, match="no answer"):
        load_questions(tmp_path / "none.json")
    (tmp_path / "kind.json").write_text(f"[{(one % answer).replace('keyword', 'vague')}]")
    with pytest.raises(ValueError):
        load_questions(tmp_path / "kind.json")


# --- the generator -------------------------------------------------------------------------


def _source(name: str, body: str) -> make_corpus.Source:
    return make_corpus.parse_source(name, f"title: A test\nauthor: Tests\n\n{body}")


def test_the_markup_reads_pages_headings_bullets_tables_and_paragraphs() -> None:
    body = "=== page\n# One\n## Sub\n- a bullet\n| A | B |\n| 1 | 2 |\ntext\n\n=== page\nmore"
    source = _source("t.pdf", body)
    assert source.title == "A test" and source.author == "Tests"
    assert source.pages == (
        (
            make_corpus.Heading("One", 1),
            make_corpus.Heading("Sub", 2),
            make_corpus.Bullet("a bullet"),
            make_corpus.Table((("A", "B"), ("1", "2"))),
            make_corpus.Paragraph("text"),
        ),
        (make_corpus.Paragraph("more"),),
    )


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("t.pdf", "author: x\n\n=== page\nhello", "no 'title:'"),
        ("t.pdf", "title: t\n\n| a | b |\n| c |", "different numbers of cells"),
    ],
)
def test_malformed_sources_are_refused(name: str, text: str, message: str) -> None:
    with pytest.raises(make_corpus.SourceError, match=message):
        make_corpus.parse_source(name, text)


def test_a_pdf_page_that_overflows_is_refused_not_moved(tmp_path: Path) -> None:
    long_page = "=== page\n" + "\n".join(["A paragraph of words that fills the page. " * 6] * 60)
    with pytest.raises(make_corpus.SourceError, match="page 1 does not fit on one page"):
        make_corpus.write_document(_source("long.pdf", long_page), tmp_path)
    assert not (tmp_path / "long.pdf").exists()


def test_text_a_core_pdf_font_cannot_show_is_refused(tmp_path: Path) -> None:
    with pytest.raises(make_corpus.SourceError, match="not Latin-1"):
        make_corpus.write_document(_source("euro.pdf", "=== page\nIt costs 5 \u20ac."), tmp_path)


def test_a_docx_with_pages_and_an_unknown_format_are_refused(tmp_path: Path) -> None:
    with pytest.raises(make_corpus.SourceError, match="a DOCX has no pages"):
        make_corpus.write_document(_source("t.docx", "one\n=== page\ntwo"), tmp_path)
    with pytest.raises(make_corpus.SourceError, match=r"only \.pdf and \.docx"):
        make_corpus.write_document(_source("t.odt", "one"), tmp_path)


def test_the_same_sources_make_the_same_bytes(tmp_path: Path) -> None:
    sources = [s for s in make_corpus.read_sources() if s.name.endswith(("recipes.pdf", "policy.docx"))]
    assert len(sources) == 2
    first = make_corpus.generate(tmp_path / "a", sources)
    second = make_corpus.generate(tmp_path / "b", sources)
    assert [p.read_bytes() for p in first] == [p.read_bytes() for p in second]


# --- the cache -----------------------------------------------------------------------------


def _copy_inputs(tmp_path: Path) -> tuple[Path, Path, Path]:
    documents = shutil.copytree(corpus_fixture.DOCUMENTS, tmp_path / "documents")
    sources = shutil.copytree(corpus_fixture.SOURCES, tmp_path / "sources")
    generator = Path(shutil.copy(corpus_fixture.GENERATOR, tmp_path / "make_corpus.py"))
    return documents, sources, generator


def test_the_cache_key_follows_every_input(tmp_path: Path) -> None:
    documents, sources, generator = _copy_inputs(tmp_path)
    key = corpus_key(documents, sources, generator)
    assert key == corpus_key()
    for changed in (documents / "marrowby_history.txt", sources / "ferry_street_lease.pdf.txt", generator):
        original = changed.read_bytes()
        changed.write_bytes(original + b"\n")
        assert corpus_key(documents, sources, generator) != key, changed.name
        changed.write_bytes(original)
    (documents / ".hidden").write_text("not a document")
    assert corpus_key(documents, sources, generator) == key


def test_a_built_corpus_is_reused_and_stale_ones_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    stale = cache / "document-corpus" / "0123456789abcdef"
    stale.mkdir(parents=True)
    folder = corpus_fixture.cached_corpus(cache)
    assert folder.name == corpus_key() and not stale.exists()
    assert sorted(p.name for p in folder.iterdir()) == sorted(MANIFEST)

    def no_generating(*_: object) -> None:
        raise AssertionError("built again")

    monkeypatch.setattr(make_corpus, "generate", no_generating)
    assert corpus_fixture.cached_corpus(cache) == folder
    assert [p.name for p in (cache / "document-corpus").iterdir()] == [folder.name]


def test_a_failed_build_leaves_no_corpus_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(folder: Path) -> None:
        (folder / "half.pdf").write_bytes(b"%PDF-")
        raise make_corpus.SourceError("broken on purpose")

    monkeypatch.setattr(make_corpus, "generate", broken)
    with pytest.raises(make_corpus.SourceError):
        corpus_fixture.cached_corpus(tmp_path)
    assert list((tmp_path / "document-corpus").iterdir()) == []


def test_build_corpus_refuses_a_folder_that_holds_something(tmp_path: Path) -> None:
    (tmp_path / "mine.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="not empty"):
        build_corpus(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["mine.txt"]
