"""Bytes that claim to be text decoded, or refused as binary.

UTF-8 first (with or without a BOM; UTF-16 and UTF-32 only with their BOM). A file that is
not UTF-8 is read as Windows-1252 (Latin-1 for the five bytes 1252 leaves undefined) only
when the result looks like Western text: mostly ASCII, no control characters. Anything
else is refused, because indexing mojibake gives answers no one can check.
"""

from __future__ import annotations

import codecs
import re
from pathlib import Path

from engine.documents.errors import DocumentRefused

# How much of the start of a file the binary sniff reads: enough for any header, cheap.
SNIFF_BYTES = 8 * 1024

# Text carries almost no C0 control bytes besides tab, newlines, form feed and ESC (ANSI
# colours in logs); random binary has about 10% of them. Above this share: binary.
MAX_CONTROL_SHARE = 0.05

# A Windows-1252 file is Western text: mostly ASCII. Above this share of other characters,
# the bytes are some other encoding (or binary), not text Hearth can read faithfully.
MAX_NON_ASCII_SHARE_1252 = 0.3

_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)

_ALLOWED_CONTROLS = frozenset(b"\t\n\x0b\x0c\r\x1b")
_CONTROL_BYTES = bytes(b for b in range(32) if b not in _ALLOWED_CONTROLS) + b"\x7f"
# Control characters in decoded text (C0 but the allowed ones, DEL, and C1).
_CONTROL_CHARS = re.compile("[\x00-\x08\x0e-\x1a\x1c-\x1f\x7f-\x9f]")
_NEWLINES = re.compile(r"\r\n?|[\u2028\u2029\x85]")


def binary_reason(path: Path) -> str:
    suffix = path.suffix.lower()
    return f"not text: binary content in a {suffix} file" if suffix else "not text: binary content"


def looks_binary(data: bytes) -> bool:
    """The sniff: a NUL byte, or too many control bytes, in the first ``SNIFF_BYTES``."""
    sample = data[:SNIFF_BYTES]
    if not sample:
        return False
    if b"\x00" in sample:
        return True
    controls = len(sample) - len(sample.translate(None, _CONTROL_BYTES))
    return controls / len(sample) > MAX_CONTROL_SHARE


def normalize_newlines(text: str) -> str:
    return _NEWLINES.sub("\n", text)


def _too_many_controls(text: str) -> bool:
    if not text:
        return False
    return len(_CONTROL_CHARS.findall(text)) / len(text) > MAX_CONTROL_SHARE / 5


def decode_text(data: bytes, path: Path, encoding: str | None = None) -> str:
    """``data`` as text with ``\\n`` newlines, or DocumentRefused. ``encoding``: one the file
    itself declares (an HTML ``<meta charset>``), tried after UTF-8 and before 1252."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            text = data[len(bom) :].decode(codec, errors="replace")
            if "\x00" in text or _too_many_controls(text):
                raise DocumentRefused(path, binary_reason(path))
            return normalize_newlines(text)
    if looks_binary(data):
        raise DocumentRefused(path, binary_reason(path))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = _decode_legacy(data, path, encoding)
    # The sniff read only the start; a NUL further on is binary all the same.
    if "\x00" in text or _too_many_controls(text):
        raise DocumentRefused(path, binary_reason(path))
    return normalize_newlines(text)


def _decode_legacy(data: bytes, path: Path, encoding: str | None) -> str:
    if encoding:
        try:
            return data.decode(encoding)
        except (LookupError, UnicodeDecodeError):
            pass
    try:
        text = data.decode("cp1252")
    except UnicodeDecodeError:
        # Latin-1 maps the bytes 1252 leaves undefined (0x81, 0x8d, 0x8f, 0x90, 0x9d) to C1
        # controls, which the control check below counts.
        text = data.decode("latin-1")
    non_ascii = len(text) - len(text.encode("ascii", errors="ignore"))
    if _too_many_controls(text):
        raise DocumentRefused(path, binary_reason(path))
    if text and non_ascii / len(text) > MAX_NON_ASCII_SHARE_1252:
        raise DocumentRefused(path, "unknown text encoding: not UTF-8 (save it as UTF-8 to index it)")
    return text
