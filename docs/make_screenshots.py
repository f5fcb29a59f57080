"""Screenshots of Hearth's main states for the README (offscreen or under xvfb-run).

Run: ``.venv/bin/python docs/make_screenshots.py`` -> docs/screenshots/*.png
"""

from __future__ import annotations

import io
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
OUT = REPO / "docs" / "screenshots"


def main() -> None:
    from PIL import Image, ImageDraw

    from app.application import create_application
    from app.main_window import MainWindow
    from app.paths import resolve_paths
    from benchmarks.bench_engine import gemma_path
    from engine.tiny_models import write_tiny_projector, write_tiny_text_model

    app = create_application()
    root = Path(tempfile.mkdtemp(prefix="hearth-shots-"))
    paths = resolve_paths(root / "data", root / "models").ensure()
    OUT.mkdir(parents=True, exist_ok=True)

    def pump(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            app.processEvents()
            time.sleep(0.005)

    def shot(window: MainWindow, name: str) -> None:
        pump(0.3)
        window.grab().save(str(OUT / f"{name}.png"))
        print("wrote", OUT / f"{name}.png")

    window = MainWindow(paths)
    window.resize(1440, 900)
    window.show()
    window.start()
    window.library.wait_idle()
    shot(window, "01-empty")

    models = root / "my-models"
    models.mkdir()
    gemma = models / "gemma-3-270m-q4_k_m.gguf"
    shutil.copyfile(gemma_path(), gemma)
    write_tiny_text_model(models / "tiny-vision-demo.gguf")
    write_tiny_projector(models / "mmproj-tiny-vision-demo.gguf")
    (models / "half-downloaded.gguf").write_bytes((models / "tiny-vision-demo.gguf").read_bytes()[:200_000])
    window.library.add_paths([models], select=gemma)
    window.library.wait_idle()
    pump(0.5)
    window.library_panel.select_path(gemma)
    window.model_panel.ctx_spin.setValue(8192)
    window.model_panel.parallel_spin.setValue(4)
    shot(window, "02-library-and-plan")

    window.model_panel.load_button.click()
    pump(0.15)
    shot(window, "03-loading")
    while window.session.state.value != "ready":
        pump(0.05)
    settings = window.sampling_panel.settings()
    for prompt in ("What is a lighthouse, and why were they built?", "Tell me a short story about a cat."):
        window.new_chat_action.trigger()
        window.sampling_panel.set_settings(type(settings)(**{**settings.to_dict(), "max_tokens": 200}))
        window.sampling_panel.changed.emit(window.sampling_panel.settings())
        window.composer.set_text(prompt)
        window.composer.submit()
    pump(2.5)
    shot(window, "04-chat-streaming")
    while window.chat.streaming:
        pump(0.1)
    window.dashboard_action.setChecked(True)
    pump(1.5)
    shot(window, "05-chat-and-dashboard")
    window.dashboard_action.setChecked(False)

    # Vision: the tiny demo model and its projector (random weights: the reply is noise,
    # the point is the image path through the app).
    tiny = models / "tiny-vision-demo.gguf"
    window.library_panel.select_path(tiny)
    pump(0.2)
    panel = window.model_panel
    panel.projector_combo.setCurrentIndex(panel.projector_combo.findText("mmproj-tiny-vision-demo.gguf"))
    panel.load_button.click()
    while window.session.state.value != "ready":
        pump(0.05)
    picture = Image.new("RGB", (320, 200), (30, 60, 110))
    draw = ImageDraw.Draw(picture)
    draw.ellipse((200, 60, 260, 120), fill=(255, 210, 80))
    draw.rectangle((0, 150, 320, 200), fill=(20, 30, 50))
    buffer = io.BytesIO()
    picture.save(buffer, format="PNG")
    window.new_chat_action.trigger()
    window.composer.attach_images([("sunset.png", buffer.getvalue())])
    window.composer.set_text("What is in this picture?")
    window.composer.submit()
    while window.chat.streaming:
        pump(0.05)
    shot(window, "06-chat-with-image")
    window.close()


if __name__ == "__main__":
    main()
