"""Screenshots of tools in the window (issue 29), at 1280×800 and 1920×1080: Qwen2.5-Coder
1.5B with the time server (PyPI) and the filesystem server (npm, as `make test` installs it)
on a notes folder, plus one server whose command does not exist; the approval bar waiting,
the finished answer with its call blocks, and Settings → Tools with a server's Details.

Run under a real X server: ``xvfb-run -a -s "-screen 0 1920x1080x24" .venv/bin/python
docs/make_tools_screenshots.py`` -> docs/screenshots/{1280,1920}-tools-*.png.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from docs.make_screenshots import OUT, SIZES, event_pumps, load_model, shot, started_window  # noqa: E402


def main() -> None:
    from app.application import create_application
    from app.platform.paths import resolve_paths
    from app.platform.qwen_model import ensure_chat_model
    from app.widgets.settings_dialog import SettingsPage
    from app.window.settings_apply import open_settings_dialog
    from engine import ServerConfig, write_mcp_config
    from tests.mcp_servers import filesystem_server, time_server

    app = create_application()
    root = Path(tempfile.mkdtemp(prefix="hearth-tools-shots-"))
    paths = resolve_paths(root / "data", root / "models").ensure()
    notes = root / "Notes"
    notes.mkdir()
    (notes / "groceries.md").write_text("- eggs\n- rice\n- green tea\n")
    (notes / "kyoto-trip.txt").write_text("Train to Kyoto on Saturday at 9:10.\n")
    broken = ServerConfig("weather", command="weather-mcp-server", args=("--units", "metric"))
    write_mcp_config(paths.mcp_config, [time_server(), filesystem_server(notes), broken])
    OUT.mkdir(parents=True, exist_ok=True)
    qwen = ensure_chat_model(REPO / ".test-cache")
    pump, until = event_pumps(app)

    def each_size(name: str, target=None) -> None:
        for width, height in SIZES:
            window.resize(width, height)
            pump(0.4)
            if target is None:
                shot(window, f"{width}-{name}")
            else:
                target.raise_()
                pump(0.3)
                target.grab().save(str(OUT / f"{width}-{name}.png"))
                print("wrote", OUT / f"{width}-{name}.png", flush=True)

    window = started_window(paths)
    window.library.wait_idle()
    until(lambda: len(window.tools.tools()) >= 10)
    load_model(window, qwen, until)
    window.new_chat()
    window.composer.set_text(f"What time is it in Tokyo? And which files are in {notes}?")
    window.composer.submit()
    bar = window.chats_page.approval
    until(lambda: bar.isVisible())
    each_size("tools-approval")
    window.resize(*SIZES[0])
    while window.chat.streaming:
        if bar.isVisible():
            bar.always.click()
        pump(0.1)
    each_size("tools-answer")

    dialog = open_settings_dialog(window, SettingsPage.TOOLS)
    page = dialog.tools_page
    until(lambda: page.tree.topLevelItemCount() == 3)
    page.tree.setCurrentItem(page.tree.topLevelItem(1))
    dialog.resize(900, 680)
    pump(0.5)
    dialog.grab().save(str(OUT / "tools-settings.png"))
    print("wrote", OUT / "tools-settings.png", flush=True)
    page.tree.setCurrentItem(page.tree.topLevelItem(2))
    pump(0.3)
    dialog.grab().save(str(OUT / "tools-settings-failed.png"))
    print("wrote", OUT / "tools-settings-failed.png", flush=True)
    dialog.close()
    window.close()


if __name__ == "__main__":
    main()
