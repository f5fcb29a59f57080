"""A user's file turned into text with positions: ``parse_document(path) -> ParsedDocument``.

The kind comes from the file's suffix (``kind_for``); each kind has its reader (Markdown,
PDF, DOCX, HTML in their own modules; text and code here). Whatever goes wrong with a file
a user gave (missing, unreadable, a FIFO, binary behind a ``.txt``, a scan, an encrypted
PDF, a zip bomb, too large, empty) ends in ``DocumentRefused`` with a one-line reason,
never in a traceback, a hang or a blown memory.
"""

from __future__ import annotations

from pathlib import Path

from engine.documents.document import (
    HEADING_SEPARATOR,
    SECTION_SEPARATOR,
    DocumentKind,
    ParsedDocument,
    Section,
    SectionDraft,
    build_document,
    full_text,
)
from engine.documents.errors import DocumentRefused
from engine.documents.source_file import open_source, read_source

__all__ = [
    "HEADING_SEPARATOR",
    "SECTION_SEPARATOR",
    "DocumentKind",
    "ParsedDocument",
    "Section",
    "full_text",
    "kind_for",
    "parse_document",
    "size_limit",
]

_TEXT_SUFFIXES = frozenset({".txt", ".text", ".log", ".rst", ".csv", ".tsv", ".org", ".adoc", ".tex"})
_MARKDOWN_SUFFIXES = frozenset({".md", ".markdown", ".mdown", ".mkd", ".mdx"})
_CODE_SUFFIXES = frozenset(
    {
        ".py", ".pyi", ".js", ".mjs", ".cjs", ".jsx", ".ts", ".tsx", ".c", ".h", ".cc", ".cpp",
        ".cxx", ".hpp", ".hh", ".hxx", ".cs", ".rs", ".go", ".java", ".kt", ".kts", ".scala",
        ".swift", ".m", ".mm", ".rb", ".php", ".pl", ".pm", ".lua", ".r", ".jl", ".dart", ".zig",
        ".sh", ".bash", ".zsh", ".fish", ".ps1", ".bat", ".sql", ".toml", ".yaml", ".yml",
        ".json", ".jsonl", ".ini", ".cfg", ".conf", ".xml", ".css", ".scss", ".vue", ".svelte",
        ".cmake", ".gradle", ".proto", ".graphql", ".hs", ".ml", ".ex", ".exs", ".erl", ".clj",
        ".el", ".vim", ".nix", ".tf",
    }
)  # fmt: skip
# Files known by their whole name, not a suffix.
_CODE_NAMES = frozenset({"makefile", "dockerfile", "containerfile", "cmakelists.txt", "justfile", "rakefile"})
_KINDS = {
    **{suffix: DocumentKind.TEXT for suffix in _TEXT_SUFFIXES},
    **{suffix: DocumentKind.MARKDOWN for suffix in _MARKDOWN_SUFFIXES},
    **{suffix: DocumentKind.CODE for suffix in _CODE_SUFFIXES},
    ".pdf": DocumentKind.PDF,
    ".docx": DocumentKind.DOCX,
    ".html": DocumentKind.HTML,
    ".htm": DocumentKind.HTML,
    ".xhtml": DocumentKind.HTML,
}

_MIB = 1024 * 1024
# The largest file of each kind Hearth reads. Text is held in memory a few times over while
# it is decoded and chunked (64 MiB of text is some 30,000 pages); a PDF or DOCX is mostly
# images, its text a small part of it.
_SIZE_LIMITS = {
    DocumentKind.TEXT: 64 * _MIB,
    DocumentKind.MARKDOWN: 64 * _MIB,
    DocumentKind.CODE: 64 * _MIB,
    DocumentKind.HTML: 64 * _MIB,
    DocumentKind.PDF: 256 * _MIB,
    DocumentKind.DOCX: 256 * _MIB,
}
_KIND_NAMES = {
    DocumentKind.TEXT: "text files",
    DocumentKind.MARKDOWN: "Markdown files",
    DocumentKind.CODE: "code files",
    DocumentKind.HTML: "HTML files",
    DocumentKind.PDF: "PDF files",
    DocumentKind.DOCX: "DOCX files",
}


def kind_for(path: Path) -> DocumentKind | None:
    """The kind a file's name says it is, or None when Hearth does not read it."""
    name = path.name.lower()
    if name in _CODE_NAMES:
        return DocumentKind.CODE
    return _KINDS.get(Path(name).suffix)


def size_limit(kind: DocumentKind) -> int:
    return _SIZE_LIMITS[kind]


def unsupported_reason(path: Path) -> str:
    suffix = path.suffix.lower()
    return f"unsupported file type {suffix}" if suffix else "unsupported file type (no suffix)"


def parse_document(path: Path) -> ParsedDocument:
    """The file's text, in sections with their pages and headings; DocumentRefused if it
    cannot be indexed."""
    path = Path(path)
    kind = kind_for(path)
    if kind is None:
        raise DocumentRefused(path, unsupported_reason(path))
    drafts = _read_sections(path, kind)
    document = build_document(path, kind, drafts)
    if not document.sections:
        raise DocumentRefused(path, "empty document")
    return document


def _read_sections(path: Path, kind: DocumentKind) -> list[SectionDraft]:
    limit, what = _SIZE_LIMITS[kind], _KIND_NAMES[kind]
    if kind is DocumentKind.PDF:
        from engine.documents.pdf_text import pdf_sections

        with open_source(path, limit, what) as (file, _size):
            return pdf_sections(path, file)
    if kind is DocumentKind.DOCX:
        from engine.documents.docx_text import docx_sections

        with open_source(path, limit, what) as (file, _size):
            return docx_sections(path, file)

    from engine.documents.text_decoding import decode_text

    data = read_source(path, limit, what)
    if kind is DocumentKind.HTML:
        from engine.documents.html_text import declared_charset, html_sections

        return html_sections(decode_text(data, path, declared_charset(data)))
    text = decode_text(data, path)
    if kind is DocumentKind.MARKDOWN:
        from engine.documents.markdown_text import markdown_sections

        return markdown_sections(text)
    if kind is DocumentKind.CODE:
        # One section headed by the file's name: code's blank lines are where chunking cuts.
        return [SectionDraft(text=text, heading=path.name)]
    return [SectionDraft(text=text)]
