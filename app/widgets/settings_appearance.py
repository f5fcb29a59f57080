"""Settings → Appearance: light, dark or the system's theme, and the text size, applied to
the whole window as they change."""

from __future__ import annotations

from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import QApplication, QComboBox, QFormLayout, QLabel, QSpinBox, QVBoxLayout, QWidget

from app.chat.theme import apply_font_size, apply_theme
from app.settings.preferences import MAX_FONT_SIZE, MIN_FONT_SIZE, Preferences, Theme

THEME_NAMES = {Theme.SYSTEM: "The system's", Theme.LIGHT: "Light", Theme.DARK: "Dark"}
SYSTEM_SIZE = MIN_FONT_SIZE - 1  # the spin box's "system" step, stored as 0


class AppearancePage(QWidget):
    def __init__(self, preferences: Preferences, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.preferences = preferences

        self.theme = QComboBox()
        self.theme.setObjectName("theme")
        for theme, name in THEME_NAMES.items():
            self.theme.addItem(name, theme)
        self.theme.currentIndexChanged.connect(self._theme_chosen)

        system = QFontDatabase.systemFont(QFontDatabase.SystemFont.GeneralFont).pointSize()
        self.font_size = QSpinBox()
        self.font_size.setObjectName("fontSize")
        self.font_size.setRange(SYSTEM_SIZE, MAX_FONT_SIZE)
        self.font_size.setSuffix(" pt")
        self.font_size.setSpecialValueText(f"the system's ({system} pt)" if system > 0 else "the system's")
        self.font_size.valueChanged.connect(self._size_chosen)

        note = QLabel("Both apply at once, to the chat's text and code too.")
        note.setWordWrap(True)
        note.setEnabled(False)  # the quiet colour
        form = QFormLayout()
        form.addRow("Theme", self.theme)
        form.addRow("Text size", self.font_size)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(note)
        layout.addStretch(1)
        self.show_settings()

    def show_settings(self) -> None:
        self.theme.blockSignals(True)
        self.theme.setCurrentIndex(self.theme.findData(self.preferences.theme()))
        self.theme.blockSignals(False)
        self.font_size.blockSignals(True)
        self.font_size.setValue(self.preferences.font_size() or SYSTEM_SIZE)
        self.font_size.blockSignals(False)

    def _theme_chosen(self, index: int) -> None:
        theme = self.theme.itemData(index)
        self.preferences.set_theme(theme)
        apply_theme(_application(), theme)

    def _size_chosen(self, value: int) -> None:
        points = 0 if value == SYSTEM_SIZE else value
        self.preferences.set_font_size(points)
        apply_font_size(_application(), points)


def _application() -> QApplication:
    app = QApplication.instance()
    assert isinstance(app, QApplication)  # a page exists only inside one
    return app
