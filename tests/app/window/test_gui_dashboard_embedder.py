"""The dashboard shows the documents' embedding model while one is open: the window's own
documents service opens the real default embedder, the "Hearth's memory" card says its name and
the engine's estimate, and the line goes when the service closes it."""

from __future__ import annotations

import shutil
from pathlib import Path

from app.platform.embedding_model import EMBEDDER_NAME
from app.platform.paths import AppPaths
from engine import estimate_embedder_memory, format_bytes, read_embedding_model
from tests.app.services.documents_support import WAIT
from tests.engine.documents.conftest import embedder_gguf, minilm_folder  # noqa: F401 (fixtures)


def test_the_embedder_appears_on_the_memory_card_while_open(
    qtbot, window, app_paths: AppPaths, embedder_gguf: Path  # noqa: F811
) -> None:
    # The default embedder already set up (what `make run` leaves): the window's service opens it.
    app_paths.embedders_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(embedder_gguf, app_paths.embedders_dir / EMBEDDER_NAME)
    window.dashboard_action.trigger()  # Ctrl+D: the dashboard is made on first show
    view = window.dashboard
    assert view is not None
    line = view.embedder_line
    assert line.parent() is view.process_card and not line.isVisible()

    service = window.documents_page.service
    with qtbot.waitSignal(service.embedder_changed, timeout=WAIT):
        service.retrieve_async([], "anything", 4096, lambda _r, _e: None)  # a search opens it
    memory = estimate_embedder_memory(read_embedding_model(embedder_gguf))
    qtbot.waitUntil(line.isVisible, timeout=WAIT)
    assert line.text() == f"Embedding model: all-MiniLM-L6-v2 · {format_bytes(memory)}"
    assert line.text() == "Embedding model: all-MiniLM-L6-v2 · 123.1 MiB"

    window.documents_page.shutdown()  # the service closes its embedder
    assert not line.isVisible() and line.text() == ""


def test_a_dashboard_made_after_the_embedder_opened_shows_it(
    qtbot, window, app_paths: AppPaths, embedder_gguf: Path  # noqa: F811
) -> None:
    app_paths.embedders_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(embedder_gguf, app_paths.embedders_dir / EMBEDDER_NAME)
    service = window.documents_page.service
    with qtbot.waitSignal(service.embedder_changed, timeout=WAIT):
        service.retrieve_async([], "anything", 4096, lambda _r, _e: None)
    assert window.dashboard is None
    window.dashboard_action.trigger()
    assert window.dashboard.embedder_line.isVisible()
    assert window.dashboard.embedder_line.text().startswith("Embedding model: all-MiniLM-L6-v2 · ")
