"""A reply's citations in the painted view: a scripted model answers "[1] and [7]" to a
question asked with the excerpts of a real index; [1] (given) is a link, [7] (never given)
plain text; the Sources list under the reply names the cited excerpt; clicking [1] or its
Sources line opens the excerpt with its file and page."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import QPoint, Qt

from app.chat import MessageData, MessageView
from app.chat.citation_links import linked_citations, sources_html
from app.chat.data import Source
from app.chat.excerpt_dialog import file_url
from app.chat.markdown import MarkdownStyle
from engine import Role
from engine.devtools.tiny_models import TinyTextSpec, write_tiny_text_model
from tests.app.documents_support import build_source, embedder, embedder_gguf, minilm_folder  # noqa: F401
from tests.helpers import WAIT, last, load, send

CITES = ("\u2581Per", "\u2581[1]", "\u2581and", "\u2581[7].", "<|im_end|>")
ANSWER = "Per [1] and [7]."


@pytest.fixture(scope="module")
def citing_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Says "Per [1] and [7]." whatever it is asked."""
    path = tmp_path_factory.mktemp("citing") / "citing.gguf"
    return write_tiny_text_model(path, TinyTextSpec(script=CITES, extra_tokens=CITES[:-1]))


def text_point(view: MessageView, message_id: object, needle: str) -> QPoint:
    """Viewport coordinates of the middle of the first ``needle`` in a message's text."""
    view.scroll_to_message(message_id)
    i = view._rows.find(message_id)
    row = view._rows[i]
    doc = view._document(row)
    found = doc.find(needle)
    assert not found.isNull(), f"{needle!r} is not in the message"
    position = (found.selectionStart() + found.selectionEnd()) // 2
    block = doc.findBlock(position)
    line = block.layout().lineForTextPosition(position - block.position())
    x = line.cursorToX(position - block.position())[0]
    top = doc.documentLayout().blockBoundingRect(block).top() + line.y() + line.height() / 2
    body = row.geom.body
    y = view._rows.top(i) - view.verticalScrollBar().value() + body.top() + int(top)
    return QPoint(view._column_x() + body.left() + int(x), y)


def test_cited_numbers_given_are_links_and_open_their_excerpt(
    qtbot,
    window,
    citing_model: Path,
    tmp_path: Path,
    embedder,  # noqa: F811
) -> None:
    source = build_source(tmp_path / "docs", embedder)
    window.chat.documents.set_source(source)
    load(qtbot, window, citing_model, ctx=4096, parallel=1)
    window.new_chat()
    window.chats_page.header.documents.set_checked_name("notes", True)
    send(qtbot, window, "How often should the espresso machine be descaled?", wait=False)
    qtbot.waitUntil(
        lambda: window.chat.streaming == 0 and not list(window.chat.documents.searching()), timeout=WAIT
    )
    view = window.message_view
    reply = last(window, Role.ASSISTANT)
    assert reply.text.strip() == ANSWER
    assert len(reply.sources) >= 3 and all(s.n != 7 for s in reply.sources)
    qtbot.waitUntil(lambda: view._rows.get(reply.id).geom is not None, timeout=WAIT)

    one = view._hit(text_point(view, reply.id, "[1]"))
    assert (one.kind, one.anchor) == ("anchor", "cite:1")
    seven = view._hit(text_point(view, reply.id, "[7]"))
    assert seven.kind == "body", "a number never given is not a link"

    document = view._document(view._rows.get(reply.id)).toPlainText()
    first = reply.sources[0]
    assert "Sources" in document
    assert f"[1] {first.label()}" in document
    assert all(f"[{s.n}] {s.label()}" not in document for s in reply.sources[1:]), "only what it cites"

    opened: list[tuple[object, int]] = []
    view.source_activated.connect(lambda message_id, n: opened.append((message_id, n)))
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=text_point(view, reply.id, "[1]"))
    dialog = view.excerpt_dialog
    assert opened == [(reply.id, 1)] and dialog is not None and dialog.isVisible()
    assert dialog.source == first
    assert dialog.title.text() == f"[1] {first.name}"
    assert dialog.path_label.text() == first.path
    assert dialog.text.toPlainText() == first.text
    assert dialog.file_url().toLocalFile() == first.path and dialog.open_button.isEnabled()

    # The Sources line opens it too.
    line = text_point(view, reply.id, f"[1] {first.name}")
    assert view._hit(line).anchor == "source:1"
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=line)
    assert opened[-1] == (reply.id, 1) and view.excerpt_dialog.isVisible()
    # Known after a restart too: shown again from the store, [1] still a link.
    window.chat.select(window.chat.current_id)
    qtbot.waitUntil(lambda: view._rows.get(reply.id).geom is not None, timeout=WAIT)
    assert view._hit(text_point(view, reply.id, "[1]")).anchor == "cite:1"


def test_a_pdf_excerpt_opens_with_its_page(qtbot) -> None:
    view = MessageView()
    qtbot.addWidget(view)
    view.resize(900, 700)
    view.show()
    pages = [Source(n, "/docs/guide.pdf", n, "", f"Page {n} says something.", 0, 20) for n in (1, 2, 3)]
    view.set_messages(
        [
            MessageData(1, Role.USER, "Where?"),
            MessageData(2, Role.ASSISTANT, "It is on page two [2], not in `a[3]`.", sources=tuple(pages)),
        ]
    )
    qtbot.waitUntil(lambda: view._rows.get(2).geom is not None)
    assert view._hit(text_point(view, 2, "[2]")).anchor == "cite:2"
    assert view._hit(text_point(view, 2, "a[3]")).kind == "body", "inside code: not a citation"
    dialog = view.open_source(2, 2)
    assert dialog is not None and dialog.where.text() == "Page 2"
    assert file_url(pages[1]).toLocalFile() == "/docs/guide.pdf"
    assert not dialog.open_button.isEnabled(), "no such file here"
    assert view.open_source(2, 9) is None


def test_markers_and_the_sources_list() -> None:
    assert linked_citations("A [1, 7] b [2][3] `c[1]`", [1, 2]) == (
        "A \\[[1](cite:1), 7\\] b [\\[2\\]](cite:2)[3] `c[1]`"
    )
    given = (
        Source(1, "/x/a.md", None, "Setup › Linux", "one two three"),
        Source(2, "/x/b.pdf", 4, "", "four"),
    )
    html = sources_html("See [2].", given, "", MarkdownStyle())
    assert "source:2" in html and "b.pdf, p. 4" in html and "source:1" not in html
    uncited = sources_html("No citation.", given, "The documents were given whole.", MarkdownStyle())
    assert "cites none" in uncited and "source:1" in uncited and "given whole" in uncited
