"""parse_document: each kind's text with its positions (pages, heading paths, offsets)."""

from __future__ import annotations

import codecs
import pickle
from pathlib import Path

import pytest

from engine.documents.document import SECTION_SEPARATOR, Section, SectionDraft, build_document
from engine.documents.errors import CollectionError, DocumentRefused
from engine.documents.parsing import DocumentKind, ParsedDocument, full_text, kind_for, parse_document
from tests.engine.documents.document_files import (
    DOCX_BLOCKS,
    HTML,
    MARKDOWN,
    PDF_PAGES,
    Heading,
    Table,
    write_docx,
    write_text_pdf,
)


def write(path: Path, text: str | bytes) -> Path:
    if isinstance(text, str):
        path.write_text(text, encoding="utf-8")
    else:
        path.write_bytes(text)
    return path


def headed(doc: ParsedDocument) -> list[tuple[str, str]]:
    """(heading, first line) of each section."""
    return [(section.heading, section.text.split("\n")[0]) for section in doc.sections]


def check_offsets(doc: ParsedDocument) -> None:
    text = full_text(doc)
    for section in doc.sections:
        assert text[section.start : section.end] == section.text
    assert text == SECTION_SEPARATOR.join(section.text for section in doc.sections)


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("notes.txt", DocumentKind.TEXT),
        ("server.LOG", DocumentKind.TEXT),
        ("table.csv", DocumentKind.TEXT),
        ("guide.rst", DocumentKind.TEXT),
        ("README.md", DocumentKind.MARKDOWN),
        ("post.markdown", DocumentKind.MARKDOWN),
        ("main.py", DocumentKind.CODE),
        ("app.ts", DocumentKind.CODE),
        ("lib.rs", DocumentKind.CODE),
        ("x.h", DocumentKind.CODE),
        ("config.yaml", DocumentKind.CODE),
        ("Makefile", DocumentKind.CODE),
        ("Paper.PDF", DocumentKind.PDF),
        ("letter.docx", DocumentKind.DOCX),
        ("page.html", DocumentKind.HTML),
        ("page.htm", DocumentKind.HTML),
        ("photo.png", None),
        ("archive.tar.gz", None),
        ("old.doc", None),
        ("README", None),
    ],
)
def test_the_kind_comes_from_the_name(name: str, kind: DocumentKind | None) -> None:
    assert kind_for(Path("/some/folder") / name) is kind


def test_text_is_utf8_with_its_bom_dropped_and_newlines_normalised(tmp_path: Path) -> None:
    path = write(tmp_path / "notes.txt", codecs.BOM_UTF8 + "Caf\u00e9 one.\r\nTwo\rThree\n\n\n".encode())
    doc = parse_document(path)
    assert doc.kind is DocumentKind.TEXT and doc.path == path
    assert doc.sections == (Section(text="Caf\u00e9 one.\nTwo\nThree", page=None, heading="", start=0),)


def test_utf16_with_its_bom_is_text(tmp_path: Path) -> None:
    path = write(
        tmp_path / "windows.txt", codecs.BOM_UTF16_LE + "Gr\u00fc\u00dfe aus Wien.".encode("utf-16-le")
    )
    assert full_text(parse_document(path)) == "Gr\u00fc\u00dfe aus Wien."


def test_windows_1252_text_is_read_when_it_is_not_utf8(tmp_path: Path) -> None:
    path = write(
        tmp_path / "legacy.txt", "Na\u00efve caf\u00e9 \u2014 \u20ac5, \u201cquoted\u201d.".encode("cp1252")
    )
    assert full_text(parse_document(path)) == "Na\u00efve caf\u00e9 \u2014 \u20ac5, \u201cquoted\u201d."


def test_markdown_sections_follow_the_heading_path(tmp_path: Path) -> None:
    doc = parse_document(write(tmp_path / "guide.md", MARKDOWN))
    assert doc.kind is DocumentKind.MARKDOWN
    assert headed(doc) == [
        ("", "Intro text before any heading."),
        ("Install", "# Install"),
        ("Install › Linux", "## Linux"),
        ("Install › Windows", "## Windows"),
        ("Usage", "# Usage"),
    ]
    # The "#" line inside the fenced block is code, not a heading.
    assert "# this is a comment in a fence" in doc.sections[2].text
    assert all(section.page is None for section in doc.sections)
    check_offsets(doc)


def test_markdown_setext_headings_closing_hashes_and_markup(tmp_path: Path) -> None:
    text = (
        "Title\n=====\n\nIntro.\n\n"
        "Part `one` ##\n-------------\n\nBody one.\n\n"
        "### [Linked](https://example.org) *deep* ###\n\nDeep body.\n\n"
        "#hashtag is not a heading\n\n"
        "## The __parse_document__ call\n\nSnake case kept.\n\n"
        "A paragraph\n\n---\n\nafter a rule, the same section."
    )
    doc = parse_document(write(tmp_path / "setext.md", text))
    assert [section.heading for section in doc.sections] == [
        "Title",
        "Title › Part one",
        "Title › Part one › Linked deep",
        "Title › The parse_document call",
    ]
    assert "#hashtag is not a heading" in doc.sections[2].text
    assert doc.sections[3].text.endswith("after a rule, the same section.")


def test_a_markdown_heading_with_nothing_under_it_lives_on_in_the_path(tmp_path: Path) -> None:
    doc = parse_document(write(tmp_path / "nested.md", "# A\n\n## B\n\nText under B.\n"))
    assert headed(doc) == [("A › B", "## B")]
    # Headings and nothing else: the headings are the text.
    only = parse_document(write(tmp_path / "only.md", "# A\n## B\n"))
    assert full_text(only) == "# A\n## B"


def test_code_is_one_section_headed_by_the_file_name_with_its_indentation(tmp_path: Path) -> None:
    source = "\n\n    indented = True\n\ndef main():\n    return 1\n"
    doc = parse_document(write(tmp_path / "tool.py", source))
    assert doc.kind is DocumentKind.CODE
    assert doc.sections == (
        Section(
            text="    indented = True\n\ndef main():\n    return 1", page=None, heading="tool.py", start=0
        ),
    )


def test_pdf_pages_are_sections_with_their_page_numbers(tmp_path: Path) -> None:
    doc = parse_document(write_text_pdf(tmp_path / "book.pdf"))
    assert doc.kind is DocumentKind.PDF
    assert [section.page for section in doc.sections] == [1, 2, 3]
    for section, page in zip(doc.sections, PDF_PAGES, strict=True):
        # PDF lines wrap where the page did; the words are the page's.
        assert section.text.split() == page.split()
    # The gap between two paragraphs on the page is a blank line in the text.
    assert "anywhere.\n\nThe planner" in doc.sections[0].text
    check_offsets(doc)


def test_a_pdf_page_without_text_is_skipped_and_the_others_kept(tmp_path: Path) -> None:
    doc = parse_document(write_text_pdf(tmp_path / "gap.pdf", ["First page.", "", "Third page."]))
    assert [(section.page, section.text) for section in doc.sections] == [
        (1, "First page."),
        (3, "Third page."),
    ]


def test_docx_headings_paragraphs_and_tables_in_order(tmp_path: Path) -> None:
    doc = parse_document(write_docx(tmp_path / "manual.docx"))
    assert doc.kind is DocumentKind.DOCX
    assert [(section.heading, section.text) for section in doc.sections] == [
        ("", "A short preface before any heading."),
        ("Install", "Install\n\nHearth runs on Linux, macOS and Windows."),
        (
            "Install › Linux",
            "Linux\n\nUnpack the archive and run the hearth script.\n\n"
            "Distribution | Package\nDebian | hearth.deb\nFedora | hearth.rpm",
        ),
        ("Usage", "Usage\n\nOpen a model, then ask it something."),
    ]
    assert DOCX_BLOCKS[1] == Heading("Install", 1)
    check_offsets(doc)


def test_docx_merged_cells_count_once(tmp_path: Path) -> None:
    import docx

    path = write_docx(tmp_path / "merged.docx", [Table((("wide", "x"), ("a", "b")))])
    document = docx.Document(str(path))
    table = document.tables[0]
    merged = table.cell(0, 0).merge(table.cell(0, 1))
    merged.text = "wide"
    document.save(str(path))
    assert full_text(parse_document(path)) == "wide\na | b"


def test_html_text_with_its_title_and_headings(tmp_path: Path) -> None:
    doc = parse_document(write(tmp_path / "guide.html", HTML))
    assert doc.kind is DocumentKind.HTML
    assert [(section.heading, section.text) for section in doc.sections] == [
        ("Hearth guide", "Welcome to the guide."),
        ("Install", "Install\n\nGet the archive."),
        ("Install › Linux", "Linux\n\nUnpack it\nRun it\n\nDebian | deb"),
        ("Usage", "Usage\n\nhearth   chat\n  --docs notes\n\nAsk & cite."),
    ]
    text = full_text(doc)
    assert "notText" not in text and "color" not in text
    check_offsets(doc)


def test_html_declared_charset_is_used_for_bytes_that_are_not_utf8(tmp_path: Path) -> None:
    page = (
        '<html><head><meta charset="iso-8859-1"><title>T</title></head><body><p>Fa\u00e7ade</p></body></html>'
    )
    doc = parse_document(write(tmp_path / "latin.htm", page.encode("latin-1")))
    assert full_text(doc) == "Fa\u00e7ade"


def test_html_without_headings_or_title(tmp_path: Path) -> None:
    doc = parse_document(
        write(tmp_path / "bare.html", "<div>One<br>two</div><div>three <b>bold</b> four</div>")
    )
    assert [(section.heading, section.text) for section in doc.sections] == [
        ("", "One\ntwo\n\nthree bold four")
    ]


def test_sections_get_offsets_and_empty_drafts_are_dropped() -> None:
    doc = build_document(
        Path("x.txt"),
        DocumentKind.TEXT,
        [SectionDraft("first"), SectionDraft("  \n \n"), SectionDraft("\n\nsecond  \n", page=2, heading="H")],
    )
    assert doc.sections == (
        Section("first", None, "", 0),
        Section("second", 2, "H", len("first") + len(SECTION_SEPARATOR)),
    )


def test_a_document_with_wrong_offsets_cannot_be_made() -> None:
    with pytest.raises(ValueError, match="should start"):
        ParsedDocument(
            Path("x.txt"), DocumentKind.TEXT, (Section("a", None, "", 0), Section("b", None, "", 2))
        )
    with pytest.raises(ValueError, match="no text"):
        ParsedDocument(Path("x.txt"), DocumentKind.TEXT, (Section(" ", None, "", 0),))


def test_refusals_are_one_line_and_survive_a_process_boundary() -> None:
    error = DocumentRefused(Path("/docs/odd\nname.txt"), "cannot read:\npermission denied")
    assert error.reason == "cannot read: permission denied"
    assert str(error) == "odd name.txt: cannot read: permission denied"
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), copy.path, copy.reason, str(copy)) == (
        DocumentRefused,
        error.path,
        error.reason,
        str(error),
    )
    bad_name = CollectionError("a/b", "a collection name cannot hold '/'")
    assert pickle.loads(pickle.dumps(bad_name)).name == "a/b"
