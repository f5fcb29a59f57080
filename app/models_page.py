"""The Models page: the library and this machine's hardware at the left, the selected
model's details, plan and load controls at the right."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtWidgets import QSplitter, QWidget

from app.widgets.hardware_panel import HardwarePanel
from app.widgets.library_panel import LibraryPanel
from app.widgets.model_panel import ModelPanel

LIBRARY_MIN_WIDTH = 240
LIBRARY_WIDTH = 330
DETAILS_MIN_WIDTH = 440


class ModelsPage(QSplitter):
    def __init__(
        self,
        library: LibraryPanel,
        hardware: HardwarePanel,
        details: ModelPanel,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(Qt.Orientation.Horizontal, parent)
        self.setObjectName("modelsPage")
        side = QSplitter(Qt.Orientation.Vertical)
        side.addWidget(library)
        side.addWidget(hardware)
        side.setStretchFactor(0, 3)
        side.setStretchFactor(1, 1)
        side.setMinimumWidth(LIBRARY_MIN_WIDTH)
        details.setMinimumWidth(DETAILS_MIN_WIDTH)
        self.addWidget(side)
        self.addWidget(details)
        self.setStretchFactor(0, 0)
        self.setStretchFactor(1, 1)
        self.setCollapsible(0, False)
        self.setCollapsible(1, False)
        self.setSizes([LIBRARY_WIDTH, 900])
        self.side = side

    def minimumSizeHint(self) -> QSize:
        return QSize(LIBRARY_MIN_WIDTH + DETAILS_MIN_WIDTH, super().minimumSizeHint().height())
