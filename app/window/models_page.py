"""The Models page: the library and this machine's hardware at the left, the selected
model's details, plan and load controls at the right."""

from __future__ import annotations

from PySide6.QtCore import QByteArray, QSize, Qt
from PySide6.QtGui import QResizeEvent, QShowEvent
from PySide6.QtWidgets import QScrollArea, QSplitter, QWidget

from app.widgets.hardware_panel import HardwarePanel
from app.widgets.library_panel import LibraryPanel

LIBRARY_MIN_WIDTH = 240
LIBRARY_WIDTH = 330
DETAILS_MIN_WIDTH = 440
LIBRARY_MAX_START_WIDTH = 460


class ModelsPage(QSplitter):
    def __init__(
        self,
        library: LibraryPanel,
        hardware: HardwarePanel,
        details: QWidget,  # the ModelPanel, or a stack of it and the remote model's panel
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
        self.details = details
        self._sized = False

    def restoreState(self, state: QByteArray) -> bool:
        restored = super().restoreState(state)
        self._sized = self._sized or restored  # the user's own split wins
        return restored

    def details_min_width(self) -> int:
        """The details never narrower than their content (the model panel's form, the
        memory bar) and its scrollbar: narrower, they scrolled sideways and cut the bar. The
        library gives way first, down to its own minimum (a docked panel takes room)."""
        need = DETAILS_MIN_WIDTH
        for area in self.details.findChildren(QScrollArea):
            content = area.widget()
            if content is None or not area.widgetResizable():
                continue
            bar = area.verticalScrollBar().sizeHint().width()
            need = max(need, content.minimumSizeHint().width() + bar + 2 * area.frameWidth())
        return need

    def _fit_details(self) -> None:
        need = self.details_min_width()
        if self.details.minimumWidth() != need:
            self.details.setMinimumWidth(need)

    def resizeEvent(self, event: QResizeEvent) -> None:
        self._fit_details()
        super().resizeEvent(event)

    def showEvent(self, event: QShowEvent) -> None:
        self._fit_details()
        super().showEvent(event)
        if not self._sized:
            # The library takes about a quarter of a wide window, not a fixed 330 px.
            self._sized = True
            width = self.width()
            library = max(LIBRARY_MIN_WIDTH, min(LIBRARY_MAX_START_WIDTH, width // 4))
            self.setSizes([library, max(self.details.minimumWidth(), width - library)])

    def minimumSizeHint(self) -> QSize:
        width = LIBRARY_MIN_WIDTH + self.details.minimumWidth() + self.handleWidth()
        return QSize(width, super().minimumSizeHint().height())
