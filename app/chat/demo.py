"""A sample conversation in the chat widgets, for looking at them without a model.

python -m app.chat.demo                       # a window
python -m app.chat.demo --screenshot out.png  # offscreen: save a picture and exit
python -m app.chat.demo --dark ...            # with a dark palette
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timedelta

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QPointF, Qt
from PySide6.QtGui import QColor, QImage, QLinearGradient, QPainter, QPalette
from PySide6.QtWidgets import QApplication, QHBoxLayout, QSplitter, QVBoxLayout, QWidget

from app.chat.data import ConversationSummary, ImageThumb, MessageData, ReplyStats
from engine import Role, StopReason

SAMPLE_REPLY = """Sure — sort with `sorted()` and a **key function**:

```python
people = [{"name": "Ann", "age": 31}, {"name": "Bob", "age": 25}]
by_age = sorted(people, key=lambda p: p["age"])
print([p["name"] for p in by_age])  # ['Bob', 'Ann']
```

A few things worth knowing:

1. `sorted()` returns a new list; `list.sort()` sorts in place.
2. Python's sort is *stable*, so you can sort by several keys in turn.
3. Use `reverse=True` for descending order.

| Method | Returns | In place |
|---|---|---|
| `sorted(xs)` | new list | no |
| `xs.sort()` | `None` | yes |
"""


def sample_image(width: int = 320, height: int = 220) -> bytes:
    """A small PNG (a sunset-ish gradient with a sun), so screenshots have a real thumbnail."""
    image = QImage(width, height, QImage.Format.Format_RGB32)
    painter = QPainter(image)
    gradient = QLinearGradient(QPointF(0, 0), QPointF(0, height))
    gradient.setColorAt(0.0, QColor("#2b5876"))
    gradient.setColorAt(1.0, QColor("#f0a35e"))
    painter.fillRect(image.rect(), gradient)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setBrush(QColor("#ffd56b"))
    painter.setPen(Qt.PenStyle.NoPen)
    painter.drawEllipse(QPointF(width * 0.62, height * 0.58), 34, 34)
    painter.setBrush(QColor("#1d3b4f"))
    painter.drawRect(0, int(height * 0.72), width, height)
    painter.end()
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buffer, "PNG")
    return bytes(data.data())


def sample_stats(**overrides: object) -> ReplyStats:
    values: dict[str, object] = {
        "decode_tokens_per_second": 48.7,
        "ttft": 0.21,
        "prompt_tokens": 1_284,
        "cached_tokens": 1_152,
        "completion_tokens": 164,
        "stop_reason": StopReason.STOP_TOKEN,
        "prefill_tokens_per_second": 2_950.0,
        "decode_seconds": 3.37,
    }
    values.update(overrides)
    return ReplyStats(**values)  # type: ignore[arg-type]


def sample_messages() -> list[MessageData]:
    image = sample_image()
    return [
        MessageData("u1", Role.USER, "How do I sort a list of dicts by a key in Python?"),
        MessageData(
            "a1",
            Role.ASSISTANT,
            SAMPLE_REPLY,
            stats=sample_stats(),
            author="gemma-3-4b-it · Q4_K_M",
            version=2,
            version_count=2,
        ),
        MessageData(
            "u2",
            Role.USER,
            "What is in this picture? Keep it short.",
            images=(ImageThumb(image, "sunset.png"),),
            version=1,
            version_count=3,
        ),
        MessageData(
            "a2",
            Role.ASSISTANT,
            "A sun setting over calm water, under a sky that fades from deep blue to orange.",
            stats=sample_stats(
                decode_tokens_per_second=51.2,
                ttft=0.64,
                prompt_tokens=1_702,
                cached_tokens=1_448,
                completion_tokens=21,
                drafted=18,
                accepted=14,
            ),
            author="gemma-3-4b-it · Q4_K_M",
        ),
    ]


def sample_conversations(now: datetime | None = None) -> list[ConversationSummary]:
    now = now or datetime.now()
    titles = [
        ("Sorting dicts in Python", timedelta(minutes=2)),
        ("Trip plan: Lisbon in 4 days", timedelta(hours=3)),
        ("Explain KV cache reuse", timedelta(days=1, hours=2)),
        ("Regex for ISO dates", timedelta(days=3)),
        ("Sourdough starter schedule", timedelta(days=12)),
        ("Cover letter draft", timedelta(days=80)),
    ]
    return [ConversationSummary(f"c{i}", title, now - age) for i, (title, age) in enumerate(titles)]


def dark_palette() -> QPalette:
    """A dark palette like the ones desktops ship (for checking the dark look anywhere)."""
    p = QPalette()
    roles = {
        QPalette.ColorRole.Window: "#1f2125",
        QPalette.ColorRole.WindowText: "#e6e6e6",
        QPalette.ColorRole.Base: "#17181b",
        QPalette.ColorRole.AlternateBase: "#222429",
        QPalette.ColorRole.Text: "#e6e6e6",
        QPalette.ColorRole.Button: "#2a2c31",
        QPalette.ColorRole.ButtonText: "#e6e6e6",
        QPalette.ColorRole.Highlight: "#3d7eff",
        QPalette.ColorRole.HighlightedText: "#ffffff",
        QPalette.ColorRole.Link: "#58a6ff",
        QPalette.ColorRole.ToolTipBase: "#2a2c31",
        QPalette.ColorRole.ToolTipText: "#e6e6e6",
        QPalette.ColorRole.PlaceholderText: "#8b8e94",
        QPalette.ColorRole.Light: "#3a3d44",
        QPalette.ColorRole.Midlight: "#30333a",
        QPalette.ColorRole.Mid: "#3a3d44",
        QPalette.ColorRole.Dark: "#121316",
        QPalette.ColorRole.Shadow: "#000000",
    }
    for role, color in roles.items():
        p.setColor(role, QColor(color))
    for role in (QPalette.ColorRole.WindowText, QPalette.ColorRole.Text, QPalette.ColorRole.ButtonText):
        p.setColor(QPalette.ColorGroup.Disabled, role, QColor("#7c7f86"))
    return p


def build_demo() -> QWidget:
    from app.chat.composer import Composer
    from app.chat.conversation_list import ConversationList
    from app.chat.message_view import MessageView
    from app.chat.sampling_panel import SamplingPanel

    window = QWidget()
    window.setWindowTitle("Hearth — chat widgets")
    layout = QHBoxLayout(window)
    layout.setContentsMargins(0, 0, 0, 0)
    splitter = QSplitter()
    conversations = ConversationList()
    conversations.set_conversations(sample_conversations())
    conversations.set_current("c0")
    conversations.set_busy("c1", True, "reading 42%")
    chat = QWidget()
    chat_layout = QVBoxLayout(chat)
    chat_layout.setContentsMargins(0, 0, 0, 0)
    chat_layout.setSpacing(0)
    view = MessageView()
    view.set_messages(sample_messages())
    composer = Composer()
    composer.attach_images([("photo.png", sample_image(200, 140))])
    chat_layout.addWidget(view, 1)
    chat_layout.addWidget(composer)
    sampling = SamplingPanel()
    splitter.addWidget(conversations)
    splitter.addWidget(chat)
    splitter.addWidget(sampling)
    splitter.setSizes([240, 760, 280])
    layout.addWidget(splitter)
    window.resize(1280, 900)
    window.view = view  # type: ignore[attr-defined]
    window.composer = composer  # type: ignore[attr-defined]
    return window


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--screenshot", help="save a PNG of the window and exit")
    parser.add_argument("--dark", action="store_true", help="use a dark palette")
    args = parser.parse_args(argv)
    app = QApplication.instance() or QApplication(sys.argv[:1])
    if args.dark:
        app.setStyle("Fusion")
        app.setPalette(dark_palette())
    window = build_demo()
    window.show()
    if args.screenshot:
        for _ in range(20):
            app.processEvents()
        view = window.view  # type: ignore[attr-defined]
        view.scroll_to_bottom()
        app.processEvents()
        window.grab().save(args.screenshot)
        return 0
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
