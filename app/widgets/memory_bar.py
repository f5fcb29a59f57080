"""A stacked bar per device: what the plan puts in memory against what is free."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QColor, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget

from engine import DeviceMemory, format_bytes


@dataclass(frozen=True)
class Part:
    label: str
    attr: str
    color: str


PARTS: tuple[Part, ...] = (
    Part("Weights", "weights", "#4C78A8"),
    Part("KV cache", "kv_cache", "#F58518"),
    Part("Compute", "compute", "#54A24B"),
    Part("Output", "output", "#B279A2"),
    Part("Projector", "projector", "#E45756"),
    Part("Draft", "draft", "#72B7B2"),
)

BAR_HEIGHT = 18
ROW_HEIGHT = 44
LEGEND_HEIGHT = 22


class MemoryBar(QWidget):
    """Paints one bar per device; a dark tick marks the free memory on that device."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._devices: tuple[DeviceMemory, ...] = ()
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setMinimumWidth(240)

    def set_devices(self, devices: tuple[DeviceMemory, ...]) -> None:
        self._devices = devices
        self.setToolTip("\n\n".join(self.describe(d) for d in devices))
        self.updateGeometry()
        self.update()

    def devices(self) -> tuple[DeviceMemory, ...]:
        return self._devices

    @staticmethod
    def label(device: DeviceMemory) -> str:
        """The line over a device's bar: ``CPU — needs 3.1 GiB, 21.0 GiB free``."""
        return f"{device.device} — needs {format_bytes(device.total)}, {format_bytes(device.available)} free"

    @staticmethod
    def describe(device: DeviceMemory) -> str:
        lines = [
            f"{device.device}: needs {format_bytes(device.total)}, {format_bytes(device.available)} free"
        ]
        for part in PARTS:
            value = getattr(device, part.attr)
            if value:
                lines.append(f"  {part.label}: {format_bytes(value)}")
        return "\n".join(lines)

    def sizeHint(self) -> QSize:
        return QSize(360, max(1, len(self._devices)) * ROW_HEIGHT + LEGEND_HEIGHT)

    def minimumSizeHint(self) -> QSize:
        return self.sizeHint()

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        palette = self.palette()
        text_color = palette.windowText().color()
        track = palette.mid().color()
        width = self.width() - 2
        y = 0
        for device in self._devices:
            scale = max(device.total, device.available, 1)
            # Short as the plan's verdict counts it (the reserve kept free included); how
            # much is said once, in the verdict, not again here with another figure.
            over = device.deficit > 0
            painter.setPen(QColor("#d62728") if over else text_color)
            label = self.label(device)
            painter.drawText(
                QRectF(1, y, width, 18), Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, label
            )
            bar = QRectF(1, y + 20, width, BAR_HEIGHT)
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(track)
            painter.drawRoundedRect(bar, 3, 3)
            x = bar.left()
            for part in PARTS:
                value = getattr(device, part.attr)
                if value <= 0:
                    continue
                w = bar.width() * value / scale
                painter.setBrush(QColor(part.color))
                painter.drawRect(QRectF(x, bar.top(), max(w, 1.0), bar.height()))
                x += w
            marker_x = bar.left() + bar.width() * device.available / scale
            painter.setPen(QPen(QColor("#d62728") if over else text_color, 2))
            painter.drawLine(int(marker_x) - 1, int(bar.top()) - 2, int(marker_x) - 1, int(bar.bottom()) + 2)
            y += ROW_HEIGHT
        x = 1.0
        for part in PARTS:
            if not any(getattr(d, part.attr) for d in self._devices):
                continue
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(QColor(part.color))
            painter.drawRect(QRectF(x, y + 6, 10, 10))
            painter.setPen(text_color)
            text_rect = QRectF(x + 14, y, 120, LEGEND_HEIGHT)
            painter.drawText(
                text_rect, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, part.label
            )
            x += 14 + painter.fontMetrics().horizontalAdvance(part.label) + 14
        painter.end()
