"""Pygments lexers compiled ahead, while the window is idle after it starts.

A lexer's first use compiles its rules (~0.1 s for Python). Left to the first reply with
code, that lands on the GUI thread while llama.cpp decodes, which on two cores takes it
from decode; a second after start the machine is idle.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, QTimer

from app.chat.markdown import WARM_LANGUAGES, warm_lexer

START_DELAY_MS = 1000


def warm_lexers_when_idle(
    context: QObject, languages: tuple[str, ...] = WARM_LANGUAGES, delay_ms: int = START_DELAY_MS
) -> None:
    """Compile one language's lexer per event-loop turn, from ``delay_ms`` on; nothing
    once ``context`` is deleted."""
    if not languages:
        return

    def warm() -> None:
        warm_lexer(languages[0])
        warm_lexers_when_idle(context, languages[1:], 0)

    QTimer.singleShot(delay_ms, context, warm)
