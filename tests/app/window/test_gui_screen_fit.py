"""The first window fits the screen it opens on (at most the available geometry, centred),
every page usable at 1280×800 and 1366×768; a saved geometry that no longer fits is pulled
back inside. The small screens are real: the window opens in a child process whose
offscreen platform has a screen of that size."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import QRect, QSize

from app.platform.paths import AppPaths
from app.window.geometry import PREFERRED_SIZE, clamp_geometry, first_geometry
from engine.machine.hardware import HardwareSnapshot
from tests.conftest import REPO, offscreen_config
from tests.helpers import open_window


@pytest.mark.parametrize(
    ("available", "expected"),
    [
        (QRect(0, 0, 1280, 800), QRect(0, 0, 1280, 800)),  # shrunk to the whole screen
        (QRect(0, 0, 1366, 768), QRect(23, 0, 1320, 768)),  # as wide as it likes, centred
        (QRect(0, 0, 1920, 1080), QRect(300, 120, 1320, 840)),
        (QRect(0, 32, 1280, 768), QRect(0, 32, 1280, 768)),  # a top panel takes 32 px
        (QRect(1920, 0, 2560, 1440), QRect(1920 + 620, 300, 1320, 840)),  # the second screen
    ],
)
def test_a_first_window_is_at_most_the_available_room_and_centred(available: QRect, expected: QRect) -> None:
    assert first_geometry(PREFERRED_SIZE, available) == expected
    assert available.contains(first_geometry(PREFERRED_SIZE, available))


@pytest.mark.parametrize(
    ("saved", "available", "expected"),
    [
        (QRect(100, 100, 1600, 1000), QRect(0, 0, 1280, 800), QRect(0, 0, 1280, 800)),  # a larger screen's
        (QRect(1000, 500, 800, 600), QRect(0, 0, 1280, 800), QRect(480, 200, 800, 600)),  # hangs off
        (QRect(-3000, 40, 900, 700), QRect(0, 0, 1366, 768), QRect(0, 40, 900, 700)),  # a screen gone
        (QRect(50, 60, 900, 700), QRect(0, 0, 1366, 768), QRect(50, 60, 900, 700)),  # fits: kept
    ],
)
def test_a_saved_geometry_that_no_longer_fits_is_clamped(
    saved: QRect, available: QRect, expected: QRect
) -> None:
    assert clamp_geometry(saved, available) == expected


def test_the_window_opens_within_its_screen_and_comes_back_clamped(
    qtbot, app_paths: AppPaths, hardware: HardwareSnapshot
) -> None:
    first = open_window(qtbot, app_paths, hardware)
    available = first.screen().availableGeometry()
    assert available.contains(first.frameGeometry())
    assert first.size() == PREFERRED_SIZE.boundedTo(available.size())
    first.resize(QSize(available.width() + 900, available.height() + 600))  # as on a larger screen
    first.close()
    second = open_window(qtbot, app_paths, hardware)
    try:
        assert available.contains(second.frameGeometry()), (second.frameGeometry(), available)
    finally:
        second.close()


SMALL_SCREEN_SCRIPT = r"""
import json, sys
from pathlib import Path
from PySide6.QtWidgets import QToolBar
from app.application import build_window, create_application
from app.platform.paths import resolve_paths
from app.widgets.nav_rail import Page
from engine.machine.hardware import described_machine

app = create_application(sys.argv[:1] + ["-platform", f"offscreen:configfile={sys.argv[1]}"])
paths = resolve_paths(Path(sys.argv[2]) / "data", Path(sys.argv[2]) / "models").ensure()
window = build_window(paths, hardware=described_machine(ram_available=12 << 30, name="Test CPU"))
window.show()
window.start(load_last=False)
for _ in range(20):
    app.processEvents()
window.library.wait_idle()
report = {
    "available": window.screen().availableGeometry().getRect(),
    "frame": window.frameGeometry().getRect(),
    "minimum": [window.minimumSizeHint().width(), window.minimumSizeHint().height()],
    "pages": {},
}
toolbar = window.findChild(QToolBar, "mainToolbar")
for page in Page:
    window.show_page(page)
    for _ in range(10):
        app.processEvents()
    widget = window.pages.currentWidget()
    report["pages"][page.value] = {
        "size": [widget.width(), widget.height()],
        "minimum": [widget.minimumSizeHint().width(), widget.minimumSizeHint().height()],
    }
settings = toolbar.widgetForAction(window.settings_action)
report["settings_button"] = [settings.isVisible(), settings.mapTo(window, settings.rect().topRight()).x()]
report["width"] = window.width()
print(json.dumps(report))
window.close()
"""


@pytest.mark.parametrize("screen", [(1280, 800), (1366, 768)])
def test_every_page_is_usable_on_a_small_screen(tmp_path: Path, screen: tuple[int, int]) -> None:
    config = offscreen_config(tmp_path / "screen.json", *screen)
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    done = subprocess.run(
        [sys.executable, "-c", SMALL_SCREEN_SCRIPT, str(config), str(tmp_path)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    available = QRect(*report["available"])
    assert available.size() == QSize(*screen)
    assert available.contains(QRect(*report["frame"])), report
    assert report["minimum"][0] <= screen[0] and report["minimum"][1] <= screen[1]
    for page, sizes in report["pages"].items():
        width, height = sizes["size"]
        min_width, min_height = sizes["minimum"]
        assert width >= min_width and height >= min_height, (page, sizes)  # nothing crushed
    visible, right = report["settings_button"]
    assert visible and right < report["width"], "Settings… is on the toolbar, not cut off"
