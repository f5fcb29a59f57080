"""DocumentsService on the real engine: a folder of real documents (and two that must be refused)
indexed on its worker with the converted all-MiniLM-L6-v2, progress and the report as signals,
pause, resume and cancel, the watcher's rescans, excerpts for a question on the GUI thread."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from app.platform.paths import AppPaths
from engine import DocumentStatus, IndexPhase
from tests.app.services.documents_support import (
    BINARY_TXT,
    SCANNED_PDF,
    TEXT_DOCUMENTS,
    WAIT,
    docs_folder,
    make_service,
)
from tests.engine.documents.conftest import embedder_gguf, minilm_folder  # noqa: F401 (fixtures)

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture()
def service(qtbot, app_paths: AppPaths, embedder_gguf: Path):  # noqa: F811
    svc = make_service(app_paths, embedder_gguf)
    yield svc
    svc.close()


def created(qtbot, service, name: str) -> None:
    service.start()
    service.create_collection(name)
    qtbot.waitUntil(lambda: name in service.collection_names(), timeout=WAIT)


def indexed(qtbot, service, name: str, folder: Path):
    """``folder`` added to ``name`` and indexed: the report."""
    with qtbot.waitSignal(service.finished, timeout=WAIT) as done:
        service.add_paths(name, [folder])
    return done.args[1]


def quiet(qtbot, service, ms: int) -> list:
    """Reports that arrive within ``ms`` (none expected when nothing changed)."""
    reports: list = []
    service.finished.connect(lambda _n, r: reports.append(r))
    qtbot.wait(ms)
    return reports


def test_creating_the_service_opens_neither_the_index_nor_llama_cpp(tmp_path: Path) -> None:
    # numpy itself is not a measure here: once PySide6 is imported, shiboken's import hook
    # reads attributes of the engine's face that import every engine package (the catalog
    # brings gguf and numpy) — the window loads them at start-up either way.
    code = (
        "import sys\n"
        "from app.platform.paths import resolve_paths\n"
        "from app.services.documents import DocumentsService\n"
        f"paths = resolve_paths({str(tmp_path / 'd')!r}, {str(tmp_path / 'm')!r}).ensure()\n"
        "service = DocumentsService(paths)\n"
        "heavy = ('llama_cpp', 'engine.documents.index', 'engine.documents.embedding')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
        "print(paths.data_dir.joinpath('documents.sqlite3').exists())\n"
    )
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[]", "False"]  # nothing imported, not even the file opened


def test_a_folder_indexes_with_progress_in_order_and_refusals_listed(qtbot, service, tmp_path: Path) -> None:
    folder = docs_folder(tmp_path / "docs")
    created(qtbot, service, "Manuals")
    events: list = []
    service.progress.connect(events.append)
    with qtbot.waitSignal(service.embedder_changed, timeout=WAIT):
        report = indexed(qtbot, service, "Manuals", folder)

    assert (report.files, report.indexed, report.refused, report.cancelled) == (5, 3, 2, False)
    assert report.chunks_embedded > 0
    phases = [e.phase for e in events]
    assert phases[0] is IndexPhase.SCANNING and phases[-1] is IndexPhase.DONE
    assert IndexPhase.INDEXING in phases
    done = [e.files_done for e in events]
    assert done == sorted(done) and done[-1] == events[-1].files_total == 5
    assert events[-1].seconds_left == 0.0
    assert any(e.chunks_per_s > 0 for e in events)

    rows = {d.path.name: d for d in service.documents("Manuals")}
    assert set(rows) == {*TEXT_DOCUMENTS, BINARY_TXT, SCANNED_PDF}
    for name in TEXT_DOCUMENTS:
        assert rows[name].status is DocumentStatus.INDEXED and rows[name].chunk_count > 0
    assert rows[BINARY_TXT].status is DocumentStatus.REFUSED
    assert rows[BINARY_TXT].reason == "not text: binary content in a .txt file"
    assert rows[SCANNED_PDF].status is DocumentStatus.REFUSED
    assert rows[SCANNED_PDF].reason.startswith("scanned PDF: no text layer")
    info = service.collections()[0]
    assert (info.name, info.indexed, info.refused, info.sources) == ("Manuals", 3, 2, (folder,))
    opened = service.open_embedder
    assert opened is not None and 50 << 20 < opened.memory < 150 << 20
    assert not service.busy and service.indexing is None


def test_pause_holds_the_run_resume_goes_on_and_cancel_keeps_what_is_done(
    qtbot, service, tmp_path: Path
) -> None:
    folder = docs_folder(tmp_path / "docs", copies=6)  # 18 documents: time to pause between files
    created(qtbot, service, "Many")
    with qtbot.waitSignal(service.job_started, timeout=WAIT):
        service.add_paths("Many", [folder])
    service.pause()
    assert service.paused
    qtbot.waitUntil(lambda: service.last_progress is not None, timeout=WAIT)
    qtbot.wait(1500)  # the file in progress may end; then nothing moves
    held = service.last_progress
    qtbot.wait(1500)
    assert service.last_progress.files_done == held.files_done
    assert service.last_progress.phase is IndexPhase.PAUSED
    assert service.busy

    service.resume()
    # Going on: a document read and stored (the two refusals are the first files done).
    qtbot.waitUntil(lambda: service.last_progress.files_done > max(held.files_done, 2), timeout=WAIT)
    service.pause()
    with qtbot.waitSignal(service.finished, timeout=WAIT) as done:
        service.cancel()
    report = done.args[1]
    assert report.cancelled and 0 < report.indexed < 18
    statuses = [d.status for d in service.documents("Many")]
    assert statuses.count(DocumentStatus.INDEXED) == report.indexed
    assert DocumentStatus.PENDING in statuses  # listed, waiting for the next run
    assert not service.busy

    # The next run embeds only what the cancelled one had not done.
    again = indexed(qtbot, service, "Many", folder)
    assert not again.cancelled and again.indexed == 18 - report.indexed
    assert again.unchanged + again.refused == report.indexed + 2


def test_the_watcher_rescans_what_changed_and_embeds_only_the_changed_chunks(
    qtbot, service, tmp_path: Path
) -> None:
    folder = docs_folder(tmp_path / "docs")
    created(qtbot, service, "Watched")
    first = indexed(qtbot, service, "Watched", folder)
    assert first.indexed == 3
    assert quiet(qtbot, service, 1500) == []  # reading the files is no change

    edited = folder / "bicycle_maintenance.txt"
    chunks_before = next(d.chunk_count for d in service.documents("Watched") if d.path == edited)
    with qtbot.waitSignal(service.finished, timeout=WAIT) as done, edited.open("a", encoding="utf-8") as f:
        f.write("\n\nA last note: check the brake pads every spring.\n")
    report = done.args[1]
    assert (report.indexed, report.unchanged, report.refused) == (1, 4, 0)  # refusals unchanged too
    assert 1 <= report.chunks_embedded <= 2 < chunks_before
    assert report.chunks_reused >= chunks_before - 1

    with qtbot.waitSignal(service.finished, timeout=WAIT) as done:
        (folder / "added.md").write_text("# Added\n\nA new page about tyre pressure.\n", encoding="utf-8")
    assert done.args[1].indexed == 1

    with qtbot.waitSignal(service.finished, timeout=WAIT) as done:
        os.rename(folder / "http_retry.py", folder / "retry.py")
    assert (done.args[1].moved, done.args[1].chunks_embedded) == (1, 0)

    with qtbot.waitSignal(service.finished, timeout=WAIT) as done:
        (folder / "added.md").unlink()
    assert done.args[1].removed == 1
    names = sorted(d.path.name for d in service.documents("Watched"))
    assert names == sorted(["bicycle_maintenance.txt", "espresso_machine_manual.md", "retry.py",
                            BINARY_TXT, SCANNED_PDF])  # fmt: skip


def test_retrieve_async_answers_on_the_gui_thread(qtbot, service, tmp_path: Path) -> None:
    folder = docs_folder(tmp_path / "docs")
    created(qtbot, service, "Manuals")
    indexed(qtbot, service, "Manuals", folder)
    answers: list = []

    def callback(result, error) -> None:
        answers.append((result, error, threading.current_thread() is threading.main_thread()))

    service.retrieve_async(["Manuals"], "How do I descale the espresso machine?", 1024, callback)
    service.retrieve_async(["Nowhere"], "anything", 1024, callback)
    qtbot.waitUntil(lambda: len(answers) == 2, timeout=WAIT)

    (result, error, on_gui), (missing, line, on_gui_too) = answers
    assert error is None and on_gui and on_gui_too
    assert not result.whole and result.excerpts
    assert result.excerpts[0].path.name == "espresso_machine_manual.md"
    assert [e.n for e in result.excerpts] == list(range(1, len(result.excerpts) + 1))
    assert missing is None and line == "There is no collection named “Nowhere”."


def test_a_changed_embedder_asks_with_its_plan_before_reindexing(
    qtbot,
    app_paths: AppPaths,
    embedder_gguf: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    from tests.engine.documents.conftest import rewrite_metadata

    folder = docs_folder(tmp_path / "docs")
    first = make_service(app_paths, embedder_gguf)
    try:
        created(qtbot, first, "Manuals")
        indexed(qtbot, first, "Manuals", folder)
        old = first.collections()[0].embedder
    finally:
        first.close()
    # The same weights in another file: another embedder as far as the index knows.
    import gguf

    other = rewrite_metadata(
        embedder_gguf,
        tmp_path / "other-embedder.gguf",
        set_keys={"general.name": ("another build", gguf.GGUFValueType.STRING)},
    )
    service = make_service(app_paths, other)
    try:
        created_before = time.monotonic()
        service.start()
        qtbot.waitUntil(lambda: service.collection_names() == ["Manuals"], timeout=WAIT)
        extra = tmp_path / "extra.md"
        extra.write_text("# Extra\n\nOne more page.\n", encoding="utf-8")
        started: list = []
        service.job_started.connect(started.append)
        with qtbot.waitSignal(service.reindex_planned, timeout=WAIT) as asked:
            service.add_paths("Manuals", [extra])
        plan = asked.args[0]
        assert plan.needed and plan.from_embedder == old and plan.to_embedder.startswith("other-embedder")
        assert plan.chunks_to_embed == service.collections()[0].chunks > 0
        assert plan.chunks_per_s > 0 and plan.seconds > 0
        qtbot.wait(300)
        assert service.collections()[0].embedder == old  # nothing started, nothing changed
        assert time.monotonic() - created_before < WAIT / 1000

        with qtbot.waitSignal(service.finished, timeout=WAIT) as rebuilt:
            service.reindex("Manuals")
        assert rebuilt.args[1].indexed == 3
        qtbot.waitUntil(lambda: len(service.documents("Manuals")) == 6, timeout=WAIT)  # extra.md added
        assert service.collections()[0].embedder == plan.to_embedder
    finally:
        service.close()
