"""Fixtures for the GUI tests: a main window on a temporary data folder (helpers in tests/helpers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.platform.gui_garbage import GuiThreadCollector
from app.platform.paths import AppPaths, resolve_paths
from engine.machine.hardware import HardwareSnapshot
from tests.api_support import ServerThread, load
from tests.helpers import open_window


@pytest.fixture(autouse=True)
def gui_thread_garbage(qapp):
    """Cycles collected on the GUI thread only, as in the app (app/platform/gui_garbage.py)."""
    collector = GuiThreadCollector()
    yield
    collector.stop()
    collector.deleteLater()


@pytest.fixture()
def app_paths(tmp_path: Path) -> AppPaths:
    """The app's data and models folders, inside this test's tmp dir."""
    return resolve_paths(tmp_path / "data", tmp_path / "models").ensure()


@pytest.fixture()
def window(qtbot, app_paths: AppPaths, hardware: HardwareSnapshot):
    """A shown, started main window with an empty library (closed after the test)."""
    win = open_window(qtbot, app_paths, hardware)
    yield win
    win.close()


@pytest.fixture(scope="module")
def scripted(scripted_model: Path):
    """The scripted tiny model loaded with two conversations (one per module)."""
    model = load(scripted_model, parallel=2)
    yield model
    model.unload()


@pytest.fixture()
def scripted_server(scripted):
    """Hearth's API server on loopback serving ``scripted`` (a test module may define its own)."""
    with ServerThread(lambda: scripted) as server:
        yield server
