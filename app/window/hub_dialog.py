"""Discover's "Hub settings…" dialog: Settings → Hub's page in a window of its own."""

from __future__ import annotations

from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QVBoxLayout,
    QWidget,
)

from app.services.discover import DiscoverController
from app.widgets.settings_hub import HubSettingsPage

__all__ = ["HubSettingsDialog"]


class HubSettingsDialog(QDialog):
    """Discover's "Hub settings…": Settings → Hub's page in a dialog of its own."""

    def __init__(self, controller: DiscoverController, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Hugging Face Hub")
        self.page = HubSettingsPage(controller)
        page = self.page
        self.endpoint, self.token, self.forget, self.parallel, self.error = (
            page.endpoint, page.token, page.forget, page.parallel, page.error
        )  # fmt: skip
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.accepted.connect(self.save)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(page)
        layout.addWidget(buttons)

    def save(self) -> None:
        if self.page.save():
            self.accept()
