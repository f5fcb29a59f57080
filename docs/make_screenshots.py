"""Screenshots of Hearth for the README, at 1280×800 and 1920×1080, with a real conversation.

Qwen2.5-Coder 1.5B Instruct (the default model) answers two questions; the window is shot
with the dashboard closed and open, the Models page with its plan, a load in progress, and
a picture sent to the tiny vision demo model (random weights: its reply is noise, the point
is the image path through the app), and a remote server: Settings → Remote servers with a
Hearth server on loopback (serving Qwen) and one offline, its model in the picker, a chat
with it; and the Discover page against the test suite's fake Hub on loopback (serving
Qwen, Gemma and the tiny vision demo), a plan read from a remote header and a download
in progress. Takes a few minutes on two cores.

Run under a real X server: ``xvfb-run -a -s "-screen 0 1920x1080x24" .venv/bin/python
docs/make_screenshots.py`` -> docs/screenshots/*.png. ``--only first-minutes`` takes just
the first minutes' shots (the picker open over a chat, a queued chat, Settings, a broken
file; popups and dialogs are grabbed from the screen), at 1280×800 and 1920×1080, and the
first window on the screen it opens on (run it on a 1280×800 screen to see that one fit).
"""

from __future__ import annotations

import io
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
OUT = REPO / "docs" / "screenshots"
SIZES = ((1280, 800), (1920, 1080))
QUESTIONS = (
    "Hello! Who are you?",
    "Write a Python function that checks whether a string is a palindrome, ignoring case and "
    "punctuation, with a short explanation.",
)


def main() -> None:
    if sys.argv[1:] == ["--only", "first-minutes"]:
        first_minutes()
        return
    from PIL import Image, ImageDraw

    from app.application import create_application
    from app.platform.default_model import ensure_default_model
    from app.platform.paths import resolve_paths
    from app.platform.qwen_model import ensure_chat_model
    from app.widgets.nav_rail import Page
    from app.window.main_window import MainWindow
    from engine.devtools.tiny_models import write_tiny_projector, write_tiny_text_model

    app = create_application()
    root = Path(tempfile.mkdtemp(prefix="hearth-shots-"))
    paths = resolve_paths(root / "data", root / "models").ensure()
    OUT.mkdir(parents=True, exist_ok=True)
    qwen = ensure_chat_model(REPO / ".test-cache")
    gemma = ensure_default_model(REPO / ".test-cache")

    pump, until = event_pumps(app)

    def each_size(window: MainWindow, name: str, prepare=None) -> None:
        for width, height in SIZES:
            window.resize(width, height)
            pump(0.4)
            if prepare is not None:
                prepare()
            shot(window, f"{width}-{name}")

    window = started_window(paths)
    window.library.wait_idle()
    shot(window, "01-empty")

    demo = root / "demo-models"
    demo.mkdir()
    tiny = write_tiny_text_model(demo / "tiny-vision-demo.gguf")
    write_tiny_projector(demo / "mmproj-tiny-vision-demo.gguf")
    (demo / "half-downloaded.gguf").write_bytes(tiny.read_bytes()[:200_000])
    window.library.add_paths([qwen, gemma, demo], select=qwen)
    window.library.wait_idle()
    until(lambda: window.library_panel.selected_path() == qwen)
    window.model_panel.ctx_spin.setValue(8192)
    window.model_panel.parallel_spin.setValue(2)
    each_size(window, "models")

    window.model_panel.load_button.click()
    pump(0.6)
    shot(window, "03-loading")
    until(lambda: window.session.ready_model is not None)
    window.new_chat()
    for question in QUESTIONS:
        window.composer.set_text(question)
        window.composer.submit()
        until(lambda: window.chat.streaming == 0)
    window.show_page(Page.CHATS)
    each_size(window, "chat")
    window.dashboard_action.setChecked(True)
    pump(2.0)
    each_size(window, "chat-and-dashboard")
    window.dashboard_action.setChecked(False)
    window.resize(*SIZES[0])

    # Vision: the tiny demo model and its projector (picked by default).
    window.show_page(Page.MODELS)
    window.library_panel.select_path(tiny)
    pump(0.3)
    window.model_panel.load_button.click()
    until(lambda: window.session.ready_model is not None and window.session.plan.model.path == tiny)
    picture = Image.new("RGB", (320, 200), (30, 60, 110))
    draw = ImageDraw.Draw(picture)
    draw.ellipse((200, 60, 260, 120), fill=(255, 210, 80))
    draw.rectangle((0, 150, 320, 200), fill=(20, 30, 50))
    buffer = io.BytesIO()
    picture.save(buffer, format="PNG")
    window.new_chat()
    panel = window.sampling_panel
    panel.set_settings(type(panel.settings())(**{**panel.settings().to_dict(), "max_tokens": 60}))
    panel.changed.emit(panel.settings())
    window.composer.attach_images([("sunset.png", buffer.getvalue())])
    window.composer.set_text("What is in this picture?")
    window.composer.submit()
    until(lambda: window.chat.streaming == 0)
    shot(window, "06-chat-with-image")
    window.close()
    remote_scene(app, root, qwen, pump, until)
    discover_scene(root, qwen, gemma, pump, until)


def discover_scene(root: Path, qwen: Path, gemma: Path, pump, until) -> None:
    """The Discover page against the fake Hub the tests use (tests/fake_hub.py), on
    loopback: a search, Qwen's plan from its remote header, a Gemma download under way."""
    import os

    from app.platform.paths import resolve_paths
    from app.widgets.nav_rail import Page
    from engine.devtools.tiny_models import write_tiny_projector, write_tiny_text_model
    from tests.fake_hub import FakeHub

    files = root / "hub-files"
    files.mkdir()
    tiny = write_tiny_text_model(files / "tiny-vision-demo-Q8_0.gguf")
    projector = write_tiny_projector(files / "mmproj-tiny-vision-demo-F16.gguf")
    hub = FakeHub()
    hub.add_repo("Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF", {qwen.name: qwen}, downloads=182_000, likes=210)
    hub.add_repo("google/gemma-3-270m-GGUF", {"gemma-3-270m-Q4_K_M.gguf": gemma}, downloads=95_000,
                 likes=120, license="gemma")  # fmt: skip
    hub.add_repo("example-org/tiny-vision-demo-GGUF", {tiny.name: tiny, projector.name: projector},
                 downloads=1_200, likes=3)  # fmt: skip
    hub.start()
    os.environ["HF_ENDPOINT"] = hub.url
    try:
        window = started_window(resolve_paths(root / "discover-data", root / "discover-models").ensure())
        window.show_page(Page.DISCOVER)
        page = window.discover_page
        page.search_field.setText("GGUF")
        page.start_search()
        until(lambda: page.results_model.rowCount() == 3)
        page.results.setCurrentIndex(page.results_model.index(0))
        until(lambda: bool(window.discover.plans))
        pump(0.5)
        for width, height in SIZES:
            window.resize(width, height)
            shot(window, f"{width}-discover")
        hub.faults.trickle_bytes_per_s = 12_000_000  # a download under way, shown mid-way
        page.results.setCurrentIndex(page.results_model.index(1))
        until(lambda: window.discover.repo is not None and window.discover.repo.repo_id.startswith("google/"))
        window.discover.download(window.discover.repo.quants[0])
        pump(4.0)
        window.resize(*SIZES[0])
        shot(window, "1280-discover-download")
        for key in list(page.download_rows()):
            window.discover.cancel(key)
        pump(0.5)
        window.close()
    finally:
        hub.stop()


def event_pumps(app):
    """``pump(seconds)`` runs the event loop that long; ``until(condition)`` until it holds."""

    def pump(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            app.processEvents()
            time.sleep(0.005)

    def until(condition, timeout: float = 600) -> None:
        end = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > end:
                raise TimeoutError("the window did not get there")
            pump(0.05)

    return pump, until


def started_window(paths):  # -> MainWindow, shown at the first size and started
    from app.application import build_window

    window = build_window(paths)
    window.resize(*SIZES[0])
    window.show()
    window.start()
    return window


def load_model(window, model: Path, until, ctx: int = 8192, parallel: int = 1) -> None:
    """Add ``model`` to the library, select it and load it with ``ctx`` per conversation."""
    window.library.add_paths([model], select=model)
    window.library.wait_idle()
    until(lambda: window.library_panel.selected_path() == model)
    window.model_panel.ctx_spin.setValue(ctx)
    window.model_panel.parallel_spin.setValue(parallel)
    window.model_panel.load_button.click()
    until(lambda: window.session.ready_model is not None)


def shot(window, name: str) -> None:
    from PySide6.QtWidgets import QApplication

    end = time.monotonic() + 0.5
    while time.monotonic() < end:
        QApplication.processEvents()
        time.sleep(0.005)
    window.grab().save(str(OUT / f"{name}.png"))
    print("wrote", OUT / f"{name}.png", flush=True)


def remote_scene(app, root: Path, model_path: Path, pump, until) -> None:
    """Settings → Remote servers, the picker and a chat, against a Hearth server on loopback
    serving ``model_path`` (as `hearth serve` would) and a server that is not there."""
    from app.platform.paths import resolve_paths
    from app.widgets.nav_rail import Page
    from engine import Engine, LoadRequest, inspect_model, plan_load, take_snapshot
    from tests.api_support import ServerThread  # the real API server, on a thread of its own

    plan = plan_load(inspect_model(model_path), take_snapshot(), LoadRequest(context_per_conversation=4096))
    served = Engine.load(plan).wait_ready(600)
    server = ServerThread(lambda: served).__enter__()
    try:
        window = started_window(resolve_paths(root / "remote-data", root / "remote-models").ensure())
        window.library.wait_idle()
        window.open_settings()
        page = window.settings_dialog.remote_page
        for name, url in (("Closet box", server.base_url), ("Old laptop", "http://127.0.0.1:9/v1")):
            page.name_edit.setText(name)
            page.url_edit.setText(url)
            page.add_button.click()
        until(lambda: all(x.state.value != "checking" for x in window.remote_servers.listings()))
        pump(0.5)
        window.settings_dialog.grab().save(str(OUT / "remote-servers.png"))
        print("wrote", OUT / "remote-servers.png", flush=True)
        window.settings_dialog.close()
        window.show_page(Page.MODELS)
        (info,) = next(x for x in window.remote_servers.listings() if x.models).models
        window.library_panel.select_remote(info.key)
        pump(0.5)
        window.grab().save(str(OUT / "1280-remote-picker.png"))
        window.remote_panel.use_button.click()
        window.new_chat()
        window.composer.set_text(QUESTIONS[0])
        window.composer.submit()
        until(lambda: window.chat.streaming == 0)
        pump(0.5)
        window.grab().save(str(OUT / "1280-remote-chat.png"))
        print("wrote", OUT / "1280-remote-chat.png", flush=True)
        window.close()
    finally:
        server.__exit__(None, None, None)
        served.unload()


def first_minutes() -> None:
    """The picker open over a chat, a chat queued behind another, Settings' pages and a
    broken file in the library, each at both sizes; ``first-window`` as it opened."""
    from app.application import create_application
    from app.platform.default_model import ensure_default_model
    from app.platform.paths import resolve_paths
    from app.platform.qwen_model import ensure_chat_model
    from app.settings.preferences import Preferences
    from app.widgets.nav_rail import Page
    from app.widgets.settings_dialog import SettingsPage

    app = create_application()
    root = Path(tempfile.mkdtemp(prefix="hearth-first-minutes-"))
    paths = resolve_paths(root / "data", root / "models").ensure()
    OUT.mkdir(parents=True, exist_ok=True)
    qwen = ensure_chat_model(REPO / ".test-cache")
    gemma = ensure_default_model(REPO / ".test-cache")
    broken = root / "downloads" / "Llama-3.2-1B-Instruct-Q4_K_M.gguf"
    broken.parent.mkdir()
    broken.write_bytes(gemma.read_bytes()[:2_589_085])  # cut inside its header

    pump, until = event_pumps(app)

    def screen_shot(window, name: str) -> None:
        """What the screen shows over the window: popups and dialogs included."""
        pump(0.6)
        frame = window.frameGeometry()
        picture = app.primaryScreen().grabWindow(0, frame.x(), frame.y(), frame.width(), frame.height())
        picture.save(str(OUT / f"{name}.png"))
        print("wrote", OUT / f"{name}.png", flush=True)

    from app.application import build_window

    window = build_window(paths)
    Preferences(window.store).set_load_last_model(False)
    window.show()
    window.start()
    screen = app.primaryScreen().availableGeometry()
    print(f"first window {window.width()}x{window.height()} on a {screen.width()}x{screen.height()} screen")
    screen_shot(window, "first-window")
    window.library.add_paths([qwen, gemma, broken.parent], select=broken)
    window.library.wait_idle()
    window.show_page(Page.MODELS)
    until(lambda: window.library_panel.selected_path() is not None)
    window.library_panel.select_path(broken)
    for width, height in SIZES:
        window.resize(width, height)
        window.move(0, 0)
        screen_shot(window, f"{width}-broken-file")

    # Qwen, one conversation at a time: a second chat waits for the first.
    window.library_panel.select_path(qwen)
    pump(0.3)
    window.model_panel.ctx_spin.setValue(4096)
    window.model_panel.parallel_spin.setValue(1)
    window.model_panel.load_button.click()
    until(lambda: window.session.ready_model is not None)
    window.show_page(Page.CHATS)
    window.new_chat()
    window.composer.set_text(QUESTIONS[0])
    window.composer.submit()
    until(lambda: window.chat.streaming == 0)
    for width, height in SIZES:
        window.resize(width, height)
        window.move(0, 0)
        pump(0.3)
        window.open_model_picker()
        screen_shot(window, f"{width}-picker")
        window.picker_popup.hide()
    window.resize(*SIZES[0])
    window.composer.set_text(QUESTIONS[1])
    window.composer.submit()
    pump(1.0)
    window.new_chat()
    window.composer.set_text("And what is a closure in Python?")
    window.composer.submit()
    for width, height in SIZES:
        window.resize(width, height)
        window.move(0, 0)
        screen_shot(window, f"{width}-queued")
    until(lambda: window.chat.streaming == 0)
    window.resize(*SIZES[0])
    window.move(0, 0)
    for page in (SettingsPage.GENERAL, SettingsPage.HARDWARE, SettingsPage.APPEARANCE):
        window.open_settings()
        window.settings_dialog.show_page(page)
        window.settings_dialog.move(window.x() + 120, window.y() + 60)
        screen_shot(window, f"1280-settings-{page.name.lower()}")
    window.settings_dialog.close()
    window.resize(*SIZES[1])
    window.move(0, 0)
    window.open_settings()
    window.settings_dialog.show_page(SettingsPage.GENERAL)
    screen_shot(window, "1920-settings-general")
    window.settings_dialog.close()
    window.close()


if __name__ == "__main__":
    main()
