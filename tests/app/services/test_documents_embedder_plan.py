"""The documents service plans its embedder before opening it: on a machine with too little free
RAM the job fails with the planner's one line and nothing is opened; an embedder that fits is
announced open (its name and memory) and closed again with the service."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from app.platform.paths import AppPaths
from app.services.document_jobs import OpenEmbedder
from app.services.documents import DocumentsService
from engine import estimate_embedder_memory, read_embedding_model
from engine.machine.hardware import described_machine
from tests.app.services.documents_support import WAIT, docs_folder
from tests.engine.documents.conftest import embedder_gguf, minilm_folder  # noqa: F401 (fixtures)

CRAMPED = described_machine(ram_total=4 << 30, ram_available=600 << 20)
ROOMY = described_machine(ram_total=4 << 30, ram_available=3 << 30)


def service_on(paths: AppPaths, gguf: Path, machine) -> DocumentsService:
    return DocumentsService(paths, embedder_path=gguf, embedder_threads=1, hardware=lambda: machine)


def embedder_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("hearth-embedder")]


@pytest.fixture()
def cramped(qtbot, app_paths: AppPaths, embedder_gguf: Path):  # noqa: F811
    svc = service_on(app_paths, embedder_gguf, CRAMPED)
    yield svc
    svc.close()


def test_an_embedder_that_does_not_fit_fails_the_job_and_opens_nothing(
    qtbot, cramped: DocumentsService, tmp_path: Path
) -> None:
    cramped.start()
    cramped.create_collection("Manuals")
    qtbot.waitUntil(lambda: "Manuals" in cramped.collection_names(), timeout=WAIT)
    opened: list = []
    cramped.embedder_changed.connect(opened.append)
    before = embedder_threads()
    with qtbot.waitSignal(cramped.failed, timeout=WAIT) as failed:
        cramped.add_paths("Manuals", [docs_folder(tmp_path / "docs")])
    name, message = failed.args
    assert name == "Manuals"
    assert message == (
        "The embedding model all-MiniLM-L6-v2 does not fit (RAM short by 35.1 MiB). "
        "Needs 123.1 MiB of RAM: exceeds the 600.0 MiB free (keeping 512.0 MiB spare)."
    )
    assert cramped._embedder_obj is None and embedder_threads() == before  # nothing loaded
    assert cramped.open_embedder is None and opened == []
    assert not cramped.busy
    qtbot.waitUntil(lambda: cramped.documents("Manuals") == [], timeout=WAIT)

    answers: list = []
    cramped.retrieve_async(["Manuals"], "how do I oil a chain?", 4096, lambda r, e: answers.append((r, e)))
    qtbot.waitUntil(lambda: bool(answers), timeout=WAIT)
    assert answers[0][0] is None and answers[0][1] == message  # a question is refused alike


def test_an_embedder_that_fits_is_announced_open_then_closed(
    qtbot, app_paths: AppPaths, embedder_gguf: Path  # noqa: F811
) -> None:
    service = service_on(app_paths, embedder_gguf, ROOMY)
    changes: list = []
    service.embedder_changed.connect(changes.append)
    with qtbot.waitSignal(service.embedder_changed, timeout=WAIT):
        service.retrieve_async([], "anything", 4096, lambda _r, _e: None)
    memory = estimate_embedder_memory(read_embedding_model(embedder_gguf))
    assert changes == [OpenEmbedder("all-MiniLM-L6-v2", memory)]
    assert service.open_embedder == changes[0]
    service.close()
    assert changes[-1] is None and service.open_embedder is None
