"""Settings → General: load the last model at start, the models folder (where downloads land,
scanned into the library), and what a new conversation starts with (the chat's own
sampling panel, so the fields, ranges and presets are the ones a conversation has)."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from PySide6.QtCore import Signal
from PySide6.QtGui import QHideEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.chat.sampling_panel import SamplingPanel, SamplingSettings
from app.settings.preferences import Preferences
from app.widgets.styles import ERROR_STYLE
from engine import EngineError


class ModelsFolder(Protocol):
    """Where downloads land and what the library scans: the window's, changed live."""

    def current(self) -> Path: ...

    def change(self, folder: Path) -> Path:
        """Use ``folder`` from now on (and at the next start); EngineError when it cannot be."""
        ...


class GeneralPage(QWidget):
    defaults_changed = Signal(object)  # SamplingSettings: what new conversations start with now

    def __init__(self, preferences: Preferences, models: ModelsFolder, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.preferences = preferences
        self.models = models

        self.load_last = QCheckBox("Load the last model used when Hearth starts")
        self.load_last.setObjectName("loadLastModel")
        self.load_last.toggled.connect(preferences.set_load_last_model)

        self.models_folder = QLineEdit()
        self.models_folder.setObjectName("modelsFolder")
        self.models_folder.setReadOnly(True)
        self.change_folder = QPushButton("Change…")
        self.change_folder.setObjectName("changeModelsFolder")
        self.change_folder.clicked.connect(self._choose_folder)
        folder_row = QHBoxLayout()
        folder_row.addWidget(self.models_folder, 1)
        folder_row.addWidget(self.change_folder)
        folder_note = QLabel(
            "Downloads from Discover land here, and its models join the library. "
            "Models already downloaded stay where they are."
        )
        folder_note.setWordWrap(True)
        folder_note.setEnabled(False)  # the quiet colour
        self.folder_error = QLabel()
        self.folder_error.setObjectName("modelsFolderError")
        self.folder_error.setStyleSheet(ERROR_STYLE)
        self.folder_error.setWordWrap(True)
        self.folder_error.setVisible(False)

        folder_field = QVBoxLayout()
        folder_field.setSpacing(4)
        folder_field.addLayout(folder_row)
        folder_field.addWidget(folder_note)
        folder_field.addWidget(self.folder_error)
        form = QFormLayout()
        form.addRow(self.load_last)
        form.addRow("Models folder", folder_field)

        self.defaults = SamplingPanel()
        self.defaults.setObjectName("newConversationDefaults")
        self.defaults.changed.connect(self._defaults_changed)
        defaults_box = QGroupBox("New conversations start with")
        box_layout = QVBoxLayout(defaults_box)
        box_layout.addWidget(self.defaults)

        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addSpacing(8)
        layout.addWidget(defaults_box, 1)
        self.show_settings()

    def show_settings(self) -> None:
        self.load_last.blockSignals(True)
        self.load_last.setChecked(self.preferences.load_last_model())
        self.load_last.blockSignals(False)
        self.models_folder.setText(str(self.models.current()))
        self._say("")
        self.defaults.set_settings(self.preferences.new_conversation_settings())

    def set_models_folder(self, folder: Path | str) -> bool:
        """Use ``folder`` (what Change… does once a folder is picked); refused in one line."""
        try:
            used = self.models.change(Path(folder))
        except EngineError as exc:
            self._say(exc.message)
            return False
        self.models_folder.setText(str(used))
        self._say("")
        return True

    def _say(self, error: str) -> None:
        self.folder_error.setText(error)
        self.folder_error.setVisible(bool(error))

    def _choose_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Models folder", str(self.models.current()))
        if folder:
            self.set_models_folder(folder)

    def _defaults_changed(self, settings: SamplingSettings) -> None:
        self.preferences.set_default_system_prompt(settings.system_prompt)
        sampling = settings.to_dict()
        del sampling["system_prompt"]
        self.preferences.set_default_sampling(sampling)
        self.defaults_changed.emit(settings)

    def hideEvent(self, event: QHideEvent) -> None:
        self.defaults.flush()  # a system prompt typed just before closing is kept
        super().hideEvent(event)
