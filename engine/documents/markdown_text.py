"""Markdown cut into sections at its headings, each with its heading path ("Install › Linux").

Only what decides the sections is parsed: ATX headings (``## Title``), setext headings (a
line underlined with ``===`` or ``---``) and fenced code blocks, inside which nothing is a
heading. The text itself is kept as written (the markup is words a search can match, and
the offsets stay true to the file). A heading with nothing under it before the next one is
not a section of its own: its title lives on in the heading path of what follows.
"""

from __future__ import annotations

import re

from engine.documents.document import SectionDraft, heading_path

_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
_ATX_CLOSING = re.compile(r"(?:^|[ \t]+)#+$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
# '=' underlines at any length; '-' from three on, so a lone "-" (an empty list item) or
# "--" is not taken for a heading's underline.
_SETEXT = re.compile(r"^ {0,3}(=+|-{3,})[ \t]*$")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
# Emphasis: '*' anywhere, '_' only outside a word ("parse_document" keeps its underscores).
_EMPHASIS = re.compile(r"(\*{1,3})(\S(?:.*?\S)?)\1|(?<!\w)(_{1,3})(\S(?:.*?\S)?)\3(?!\w)")


def clean_title(raw: str) -> str:
    """A heading's words without markup: links as their text, no backticks or emphasis."""
    title = _ATX_CLOSING.sub("", raw.strip()).strip()
    title = _LINK.sub(r"\1", title).replace("`", "")
    title = _EMPHASIS.sub(lambda match: match.group(2) or match.group(4), title)
    return " ".join(title.split())


def markdown_sections(text: str) -> list[SectionDraft]:
    lines = text.split("\n")
    headings: dict[int, tuple[int, str, int]] = {}  # first line -> (level, title, lines used)
    fence: str | None = None
    for index, line in enumerate(lines):
        if fence is not None:
            stripped = line.strip()
            if stripped.startswith(fence) and not stripped.strip(fence[0]):
                fence = None
            continue
        fence_match = _FENCE.match(line)
        if fence_match:
            fence = fence_match.group(1)
            continue
        atx = _ATX.match(line)
        if atx:
            headings[index] = (len(atx.group(1)), clean_title(atx.group(2) or ""), 1)
            continue
        underline = _SETEXT.match(lines[index + 1]) if index + 1 < len(lines) else None
        previous_blank = index == 0 or not lines[index - 1].strip() or (index - 1) in headings
        if underline and line.strip() and previous_blank and not _FENCE.match(line):
            level = 1 if underline.group(1).startswith("=") else 2
            headings[index] = (level, clean_title(line), 2)

    drafts: list[SectionDraft] = []
    stack: list[tuple[int, str]] = []
    current_start = 0
    current_heading = ""
    current_body_start = 0  # the first line after the heading's own line(s)
    for index in [*sorted(headings), len(lines)]:
        body = "\n".join(lines[current_body_start:index])
        if body.strip():
            drafts.append(SectionDraft(text="\n".join(lines[current_start:index]), heading=current_heading))
        if index == len(lines):
            break
        level, title, used = headings[index]
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        current_heading = heading_path(t for _, t in stack)
        current_start = index
        current_body_start = index + used
    # Headings and nothing else: the headings are the text.
    return drafts or [SectionDraft(text=text)]
