"""Colours for the chat widgets, derived from the current QPalette so light and dark system
themes both work without hard-coded backgrounds."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtGui import QColor, QFontDatabase, QPalette

from app.chat.markdown import MarkdownStyle


def is_dark(palette: QPalette) -> bool:
    return palette.color(QPalette.ColorRole.Base).lightness() < 128


def mix(a: QColor, b: QColor, t: float) -> QColor:
    """``a`` moved a fraction ``t`` towards ``b`` (alpha ignored)."""
    return QColor(
        round(a.red() + (b.red() - a.red()) * t),
        round(a.green() + (b.green() - a.green()) * t),
        round(a.blue() + (b.blue() - a.blue()) * t),
    )


@dataclass(frozen=True)
class ChatColors:
    dark: bool
    text: QColor
    muted: QColor
    faint: QColor  # what cannot be used right now (a version arrow at the end)
    bubble: QColor  # the user's messages
    bubble_border: QColor
    hover: QColor  # action buttons under the mouse
    error: QColor
    warning: QColor
    accent: QColor
    track: QColor  # empty part of progress bars

    @classmethod
    def from_palette(cls, palette: QPalette) -> ChatColors:
        dark = is_dark(palette)
        base = palette.color(QPalette.ColorRole.Base)
        text = palette.color(QPalette.ColorRole.Text)
        accent = palette.color(QPalette.ColorRole.Highlight)
        return cls(
            dark=dark,
            text=text,
            muted=mix(text, base, 0.45),
            faint=mix(text, base, 0.75),
            bubble=mix(base, accent, 0.22 if dark else 0.10),
            bubble_border=mix(base, accent, 0.35 if dark else 0.22),
            hover=mix(base, text, 0.12 if dark else 0.08),
            # Reds and ambers readable on either background (GitHub's Primer values).
            error=QColor("#ff7b72") if dark else QColor("#cf222e"),
            warning=QColor("#d29922") if dark else QColor("#9a6700"),
            accent=accent,
            track=mix(base, text, 0.15),
        )


def markdown_style(palette: QPalette) -> MarkdownStyle:
    dark = is_dark(palette)
    base = palette.color(QPalette.ColorRole.Base)
    text = palette.color(QPalette.ColorRole.Text)
    link = palette.color(QPalette.ColorRole.Link)
    if dark and link.lightness() < 110:
        link = QColor("#58a6ff")  # some dark palettes keep the light theme's dark-blue link
    mono = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont).family()
    return MarkdownStyle(
        dark=dark,
        # Pygments' github-dark is drawn on #0d1117 and "default" on #f8f8f8; these stay
        # close to those while blending with the palette's own base colour.
        code_background=(
            mix(base, QColor("#0d1117"), 0.6) if dark else mix(base, QColor("#f6f8fa"), 0.9)
        ).name(),
        code_header=(mix(base, text, 0.08) if dark else mix(base, QColor("#eaeef2"), 0.9)).name(),
        code_border=mix(base, text, 0.18 if dark else 0.15).name(),
        inline_code_background=mix(base, text, 0.12 if dark else 0.07).name(),
        muted=mix(text, base, 0.45).name(),
        link=link.name(),
        monospace_family=f"'{mono}', monospace",
    )
