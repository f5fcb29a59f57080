"""The numbered excerpts in the prompt, and the [n] markers a reply cites them by."""

from __future__ import annotations

from pathlib import Path

from engine.documents.citations import (
    INSTRUCTION,
    WHOLE_NOTE,
    Citation,
    cited_numbers,
    excerpt_label,
    find_citations,
    prompt_block,
)
from engine.documents.retrieval import Excerpt, Retrieval, RetrievalMode


def excerpt(
    n: int, path: str, text: str, page: int | None = None, last: int | None = None, heading: str = ""
) -> Excerpt:
    return Excerpt(
        n, "c", Path(path), page, last if last is not None else page, heading, text, 1.0, (n,), 0, 1, 3
    )


def retrieval(*excerpts: Excerpt, whole: bool = False) -> Retrieval:
    return Retrieval("q", excerpts, whole, RetrievalMode.HYBRID, 0)


def test_the_prompt_block_numbers_each_excerpt_with_its_file_and_page() -> None:
    block = prompt_block(
        retrieval(
            excerpt(1, "/home/u/docs/report.pdf", "Revenue rose 4%.", page=3),
            excerpt(2, "/home/u/notes.md", "Run make.", heading="Setup › Linux"),
            excerpt(3, "/x/long.pdf", "Spans a break.", page=7, last=8),
        )
    )
    assert block.split("\n\n") == [
        INSTRUCTION,
        "[1] report.pdf, p. 3: Revenue rose 4%.",
        "[2] notes.md, Setup › Linux: Run make.",
        "[3] long.pdf, pp. 7–8: Spans a break.",
    ]
    assert "[n]" not in INSTRUCTION and "[1]" in INSTRUCTION  # it shows the form to cite by


def test_whole_documents_are_announced_and_no_excerpts_is_no_block() -> None:
    block = prompt_block(retrieval(excerpt(1, "a.txt", "All of it."), whole=True))
    assert block.startswith(INSTRUCTION + " " + WHOLE_NOTE)
    assert prompt_block(retrieval()) == ""
    assert excerpt_label(excerpt(1, "a.txt", "x")) == "a.txt"


def test_markers_single_grouped_and_side_by_side_are_found_in_order() -> None:
    given = {1, 2, 3, 4}
    reply = "Revenue rose [2]. Costs fell [1, 3] and [4][1]. Again [ 2 ;3 ]."
    assert cited_numbers(reply, given) == [2, 1, 3, 4]
    found = find_citations(reply, given)
    assert [reply[c.start : c.end] for c in found] == ["[2]", "[1, 3]", "[4]", "[1]", "[ 2 ;3 ]"]
    assert found[1] == Citation(reply.index("[1, 3]"), reply.index("[1, 3]") + 6, (1, 3))


def test_numbers_never_given_are_not_citations() -> None:
    reply = "See [7] and [2, 9] and [12]."
    assert cited_numbers(reply, {1, 2}) == [2]
    assert [c.numbers for c in find_citations(reply, {1, 2})] == [(2,)]
    assert cited_numbers(reply, set()) == []


def test_markers_in_code_are_not_citations() -> None:
    reply = (
        "Use `xs[1]` to index [1].\n"
        "```python\nprint(a[2])\n```\n"
        "~~~\nb[3]\n~~~\n"
        "Also ``c[4]`` and then [3].\n"
        "```\nunclosed[4]"
    )
    assert cited_numbers(reply, {1, 2, 3, 4}) == [1, 3]


def test_brackets_that_are_not_number_lists_are_ignored() -> None:
    reply = "A [link](http://x) [a1] [1a] [-1] [1.5] [1,] [] [^2] and [2]"
    assert cited_numbers(reply, {1, 2, 5}) == [2]
