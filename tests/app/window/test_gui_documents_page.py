"""The Documents page, driven as a user does (offscreen), on the real service and engine: a
collection made, a folder added through what Add folder… calls, its files listed with their
statuses and reasons while the progress bar moves, pause and cancel, a reindex asked first."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtTest import QTest

from app.platform.paths import AppPaths
from app.widgets.nav_rail import Page
from app.window.documents_page import DocumentsPage
from tests.app.services.documents_support import BINARY_TXT, SCANNED_PDF, WAIT, docs_folder, make_service
from tests.engine.documents.conftest import embedder_gguf, minilm_folder  # noqa: F401 (fixtures)
from tests.helpers import show_widget


@pytest.fixture()
def page(qtbot, app_paths: AppPaths, embedder_gguf: Path):  # noqa: F811
    shown = DocumentsPage(make_service(app_paths, embedder_gguf))
    show_widget(qtbot, shown, 1280, 800)
    yield shown
    shown.shutdown()


def with_collection(qtbot, page: DocumentsPage, name: str) -> None:
    page.create_collection(name)
    qtbot.waitUntil(lambda: page.panel.selected() == name, timeout=WAIT)


def rows(page: DocumentsPage) -> dict[str, tuple[str, str, str, str]]:
    model = page.panel.model
    out = {}
    for r in range(model.rowCount()):
        name, *rest = (model.data(model.index(r, c)) for c in range(model.columnCount()))
        out[name] = tuple(rest)
    return out


def test_a_folder_indexes_with_its_rows_the_bar_moving_then_pause_and_cancel(
    qtbot, page: DocumentsPage, tmp_path: Path
) -> None:
    folder = docs_folder(tmp_path / "docs", copies=4)  # 12 documents and 2 to refuse
    panel = page.panel
    assert not panel.add_folder_button.isEnabled() and panel.hint.isVisible()
    with_collection(qtbot, page, "Manuals")
    assert panel.add_folder_button.isEnabled() and panel.title.text() == "Manuals"

    values: list[int] = []
    page.service.progress.connect(lambda _e: values.append(panel.progress.bar.value()))
    page.add_paths([folder])  # what Add folder… calls with the folder chosen
    qtbot.waitUntil(lambda: panel.progress.isVisible(), timeout=WAIT)
    assert panel.progress.title.text() == "Indexing “Manuals”"
    qtbot.waitUntil(lambda: panel.progress.bar.value() >= 4, timeout=WAIT)  # 2 refused, 2 read
    assert panel.progress.bar.maximum() == 14
    assert panel.progress.bar.text() == f"{panel.progress.bar.value()} / 14 files"
    qtbot.waitUntil(lambda: "chunks/s" in panel.progress.rate.text(), timeout=WAIT)
    assert "left" in panel.progress.rate.text()

    QTest.mouseClick(panel.progress.pause_button, Qt.MouseButton.LeftButton)
    assert panel.progress.pause_button.text() == "Resume" and page.service.paused
    qtbot.waitUntil(lambda: [v[1] for v in rows(page).values()].count("indexed") >= 2, timeout=WAIT)
    listed = rows(page)
    assert len(listed) == 14
    assert listed[BINARY_TXT][1] == "refused: not text: binary content in a .txt file"
    assert listed[SCANNED_PDF][1].startswith("refused: scanned PDF: no text layer")
    assert listed["bicycle_maintenance.txt"][0] == str(folder)
    statuses = [status for _folder, status, _chunks, _pages in listed.values()]
    assert "pending" in statuses and "indexed" in statuses  # mid-run: both shown
    indexed = [v for v in listed.values() if v[1] == "indexed"]
    assert all(int(chunks) > 0 for _f, _s, chunks, _p in indexed)

    with qtbot.waitSignal(page.service.finished, timeout=WAIT) as done:
        QTest.mouseClick(panel.progress.cancel_button, Qt.MouseButton.LeftButton)
    assert done.args[1].cancelled
    assert not panel.progress.isVisible()
    assert panel.message.text().startswith("“Manuals” — Stopped:")
    assert values == sorted(values) and values[-1] > values[0]
    qtbot.waitUntil(lambda: panel.summary.text().startswith("14 files"), timeout=WAIT)
    assert "2 refused" in panel.summary.text() and "pending" in panel.summary.text()


def test_a_reindex_shows_its_cost_first_and_remove_asks(qtbot, page: DocumentsPage, tmp_path: Path) -> None:
    folder = docs_folder(tmp_path / "docs")
    with_collection(qtbot, page, "Manuals")
    with qtbot.waitSignal(page.service.finished, timeout=WAIT):
        page.add_paths([folder])
    qtbot.waitUntil(lambda: page.panel.reindex_button.isEnabled(), timeout=WAIT)
    asked: list[tuple[str, str]] = []
    answers = [False, True]
    page.confirm = lambda title, text: (asked.append((title, text)), answers.pop(0))[1]

    with qtbot.waitSignal(page.service.reindex_planned, timeout=WAIT):
        page.service.plan_reindex("Manuals", 128)  # what Reindex… asks with 128 tokens chosen
    title, text = asked[0]
    assert title == "Reindex collection"
    assert "chunks go from ≤ 256 to ≤ 128 tokens" in text and "chunks to embed" in text
    assert "keeps answering" in text
    assert not page.service.busy  # declined: nothing started

    with qtbot.waitSignal(page.service.finished, timeout=WAIT) as done:
        page.service.plan_reindex("Manuals", 128)
    assert done.args[1].indexed == 3
    qtbot.waitUntil(lambda: "≤ 128 tokens" in page.panel.summary.text(), timeout=WAIT)

    page.confirm = lambda title, text: (asked.append((title, text)), True)[1]
    page.ask_remove("Manuals")
    assert asked[-1][0] == "Remove collection" and "files stay where they are" in asked[-1][1]
    qtbot.waitUntil(lambda: page.panel.collections.count() == 0, timeout=WAIT)
    assert page.panel.hint.isVisible() and folder.is_dir()


def test_files_dropped_on_the_page_join_the_selected_collection(
    qtbot, page: DocumentsPage, tmp_path: Path
) -> None:
    note = tmp_path / "note.md"
    note.write_text("# A note\n\nDropped onto the page.\n", encoding="utf-8")
    with_collection(qtbot, page, "Notes")
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(note))])
    enter = QDragEnterEvent(QPoint(50, 50), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                            Qt.KeyboardModifier.NoModifier)  # fmt: skip
    page.panel.dragEnterEvent(enter)
    assert enter.isAccepted()
    drop = QDropEvent(QPointF(50, 50), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                      Qt.KeyboardModifier.NoModifier)  # fmt: skip
    with qtbot.waitSignal(page.service.finished, timeout=WAIT) as done:
        page.panel.dropEvent(drop)
    assert done.args[1].indexed == 1
    qtbot.waitUntil(lambda: rows(page).get("note.md", ("", ""))[1] == "indexed", timeout=WAIT)


def test_the_window_has_a_documents_page(qtbot, window) -> None:
    assert window.nav.buttons[Page.DOCUMENTS].text() == "Documents"
    window.page_actions[Page.DOCUMENTS].trigger()
    assert window.current_page() is Page.DOCUMENTS and window.nav.page() is Page.DOCUMENTS
    assert window.pages.currentWidget() is window.documents_page
    page = window.documents_page
    page.create_collection("Reading")
    qtbot.waitUntil(lambda: page.panel.selected() == "Reading", timeout=WAIT)
    assert window.documents_page.service.collection_names() == ["Reading"]
    assert (window.paths.data_dir / "documents.sqlite3").exists()
