"""Colours for the chat widgets, derived from the current QPalette so light and dark system
themes both work without hard-coded backgrounds; and the window's theme and font size
(Settings → Appearance), applied to the whole application."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFont, QFontDatabase, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication

from app.chat.markdown import MarkdownStyle
from app.settings.preferences import Preferences, Theme


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


def dark_palette() -> QPalette:
    """A dark palette for Fusion (and the chat's colours, which derive from it)."""
    window, base, text = QColor("#2d2d30"), QColor("#1e1e1e"), QColor("#e6e6e6")
    muted = QColor("#8a8a8a")
    palette = QPalette()
    roles = QPalette.ColorRole
    for role, color in (
        (roles.Window, window),
        (roles.WindowText, text),
        (roles.Base, base),
        (roles.AlternateBase, QColor("#262628")),
        (roles.ToolTipBase, window),
        (roles.ToolTipText, text),
        (roles.PlaceholderText, muted),
        (roles.Text, text),
        (roles.Button, QColor("#3a3a3d")),
        (roles.ButtonText, text),
        (roles.BrightText, QColor("#ff7b72")),
        (roles.Light, QColor("#505053")),
        (roles.Midlight, QColor("#3f3f42")),
        (roles.Mid, QColor("#2a2a2c")),
        (roles.Dark, QColor("#191919")),
        (roles.Shadow, QColor("#000000")),
        (roles.Highlight, QColor("#2f6fd0")),
        (roles.HighlightedText, QColor("#ffffff")),
        (roles.Link, QColor("#58a6ff")),
        (roles.LinkVisited, QColor("#bc8cff")),
    ):
        palette.setColor(role, color)
    disabled = QPalette.ColorGroup.Disabled
    for role in (roles.WindowText, roles.Text, roles.ButtonText):
        palette.setColor(disabled, role, muted)
    palette.setColor(disabled, roles.Highlight, QColor("#444446"))
    return palette


def apply_theme(app: QApplication, theme: Theme) -> None:
    """Light, dark or the system's, live: widgets get a PaletteChange (the message view
    restyles its Markdown from it). The colour scheme is also asked of the platform (Qt 6.8+)
    so native parts (title bars, dialogs) follow where the platform supports it."""
    hints = QGuiApplication.styleHints()
    if theme is Theme.SYSTEM:
        if hasattr(hints, "unsetColorScheme"):
            hints.unsetColorScheme()
        elif hasattr(hints, "setColorScheme"):
            hints.setColorScheme(Qt.ColorScheme.Unknown)
        app.setPalette(QPalette())  # resolved against the platform's: the system palette
    else:
        dark = theme is Theme.DARK
        if hasattr(hints, "setColorScheme"):
            hints.setColorScheme(Qt.ColorScheme.Dark if dark else Qt.ColorScheme.Light)
        app.setPalette(dark_palette() if dark else app.style().standardPalette())
    _repolish_style_sheets(app)


def apply_font_size(app: QApplication, points: int) -> None:
    """The application font at ``points`` (0: the system's size), live for every widget that
    has not set its own font."""
    system = QFontDatabase.systemFont(QFontDatabase.SystemFont.GeneralFont)
    font = QFont(system)
    if points > 0:
        font.setPointSize(points)
    app.setFont(font)
    _repolish_style_sheets(app)


def _repolish_style_sheets(app: QApplication) -> None:
    """A widget with a style sheet keeps the font and palette(...) colours resolved when it
    was polished (the composer stayed at the old size): set again, it resolves them anew."""
    for widget in app.allWidgets():
        if sheet := widget.styleSheet():
            widget.setStyleSheet(sheet)


def apply_appearance(app: QApplication, preferences: Preferences) -> None:
    """At start-up: the saved theme and font size; the system's are left alone untouched."""
    if preferences.theme() is not Theme.SYSTEM:
        apply_theme(app, preferences.theme())
    if preferences.font_size():
        apply_font_size(app, preferences.font_size())
