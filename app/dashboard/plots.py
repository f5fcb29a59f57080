"""Live time-series cards: a title, a legend that doubles as the current values, a pyqtgraph plot.

Cheap by construction, because they redraw several times a second beside a decoding model:
- every curve is one ``PlotDataItem`` created once and fed ``setData`` with numpy views of
  the history's ring buffers (the only allocation is ``times - now``);
- the x axis is "seconds before now" and the y range moves only in steps (``SPANS_S``,
  ``nice_ceiling``), so the axes' cached pictures are rarely regenerated;
- a card scrolled out of sight (or on a hidden tab) skips its update entirely.

The plots are read, not explored: they neither zoom nor pan, and a wheel over one scrolls
the page it sits in.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QPalette, QWheelEvent
from PySide6.QtWidgets import (
    QAbstractScrollArea,
    QApplication,
    QFrame,
    QGraphicsItem,
    QLabel,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from app.dashboard.metrics import SeriesTable
from engine import format_bytes, format_count

# Tableau 10: distinct in light and dark palettes, and the memory bar's first colours.
COLORS = (
    "#4C78A8",
    "#F58518",
    "#54A24B",
    "#E45756",
    "#72B7B2",
    "#B279A2",
    "#EECA3B",
    "#9D755D",
    "#FF9DA6",
    "#BAB0AC",
)

PLOT_HEIGHT = 160
# One-pixel cosmetic lines take the raster engine's fast path; two pixels cost about twice as much.
LINE_WIDTH = 1
AXIS_WIDTH = 46  # fixed, so the plots of stacked cards line up
# The x ranges a plot steps through as its table fills: it shows the span its data covers
# (at least half of it filled) rather than a strip at the right of the whole window.
SPANS_S = (30.0, 60.0, 120.0, 180.0, 300.0)
# Major ticks of the time axis (seconds), the first one whose labels stay this far apart.
TIME_STEPS_S = (5, 10, 15, 20, 30, 60, 120, 300, 600, 900, 1800, 3600)
MIN_LABEL_GAP_PX = 56  # "−10 min" is ~45 px wide
LABEL_OVERHANG_PX = 24  # the end labels may reach this far past the plot (under the y axis)
_BYTE_UNITS = ((1024**3, "GiB"), (1024**2, "MiB"), (1024, "KiB"), (1, "B"))


def color_for(i: int) -> str:
    return COLORS[i % len(COLORS)]


# -- value formatting for legends (the axes use pyqtgraph's own tick labels) -----------------


def fmt_percent(v: float) -> str:
    return f"{v:.0f}%"


def fmt_rate(v: float) -> str:
    return f"{format_count(round(v))} tok/s"


def fmt_count(v: float) -> str:
    return format_count(round(v))


def fmt_celsius(v: float) -> str:
    return f"{v:.0f} °C"


def fmt_watts(v: float) -> str:
    return f"{v:.0f} W"


@dataclass(frozen=True)
class Series:
    """One curve: a history column, how it is drawn, and how its latest value is written."""

    column: str
    label: str
    color: str
    fmt: Callable[[float], str] = fmt_count
    dashed: bool = False
    fill: bool = False


def visible_span(age: float, window_s: float) -> float:
    """The x range (seconds) for a table whose oldest row in the window is ``age`` seconds
    old: the first of ``SPANS_S`` that holds it, and never more than ``window_s``."""
    for span in SPANS_S:
        if span >= window_s:
            break
        if age <= span:
            return span
    return window_s


class TimeAxis(pg.AxisItem):
    """Bottom axis in "seconds before now" (−2 min … now): labels at round steps, as dense
    as the plot's width allows, whatever the span."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__("bottom", **kwargs)
        self.setStyle(maxTextLevel=0)  # labels on the major ticks only

    def boundingRect(self) -> QRectF:
        # pyqtgraph leaves out the overhang when a grid is shown, and drops labels outside
        # this rectangle: "now" and the oldest label would vanish.
        return super().boundingRect().adjusted(-LABEL_OVERHANG_PX, 0, LABEL_OVERHANG_PX, 0)

    def tickSpacing(self, minVal: float, maxVal: float, size: float) -> list[tuple[float, float]]:
        if maxVal <= minVal or size <= 0:
            return []
        pixels_per_s = size / (maxVal - minVal)
        major = next((s for s in TIME_STEPS_S if s * pixels_per_s >= MIN_LABEL_GAP_PX), TIME_STEPS_S[-1])
        return [(float(major), 0.0), (major / 2, 0.0)]

    def tickStrings(self, values: list[float], scale: float, spacing: float) -> list[str]:
        return [ago(-v) if v <= 0 else "" for v in values]


def ago(seconds: float) -> str:
    """A time-axis label: "now", "−30 s", "−2 min"."""
    whole = round(seconds)
    if whole == 0:
        return "now"
    if whole % 60 == 0:
        return f"−{whole // 60} min"
    return f"−{whole} s"


class ValueAxis(pg.AxisItem):
    """Left axis: pyqtgraph's labels, but 12.5K rather than 12500 for large values."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__("left", **kwargs)
        self.setWidth(AXIS_WIDTH)

    def tickStrings(self, values: list[float], scale: float, spacing: float) -> list[str]:
        if values and max(abs(v) for v in values) >= 1000:
            return [format_count(v) for v in values]
        return super().tickStrings(values, scale, spacing)


def nice_ceiling(value: float, floor: float = 1.0) -> float:
    """The next of 1, 2, 2.5, 5 × 10^k at or above ``value`` (and at least ``floor``).

    Stepping the y range keeps it still while values wiggle: the axis is regenerated
    only when a value crosses a step.
    """
    if not math.isfinite(value) or value <= floor:
        return floor
    magnitude = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if step * magnitude >= value:
            return step * magnitude
    return 10 * magnitude  # pragma: no cover - the loop always returns


def finite_max(values: np.ndarray) -> float:
    """Largest finite value, -inf when there is none (no warning on all-NaN input)."""
    if not values.size:
        return -math.inf
    return float(np.fmax.reduce(values, initial=-math.inf))


def forward_wheel(widget: QWidget, event: QWheelEvent) -> None:
    """Hand a wheel event to the nearest scroll area around ``widget``, so the page scrolls."""
    parent = widget.parentWidget()
    while parent is not None and not isinstance(parent, QAbstractScrollArea):
        parent = parent.parentWidget()
    if parent is None:
        event.ignore()
        return
    # Sent, not ignored and left to propagate: Qt propagates only spontaneous wheel events,
    # and this also serves wheels that reach the plot through another widget.
    QApplication.sendEvent(parent.viewport(), event)


class StaticPlot(pg.PlotWidget):
    """A PlotWidget that is only looked at: the wheel scrolls the page instead of zooming."""

    def wheelEvent(self, event: QWheelEvent) -> None:
        forward_wheel(self, event)


class Card(QFrame):
    """A titled, framed panel; plot cards and message cards share the look."""

    def __init__(self, title: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("dashboardCard")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        # palette(...) keeps the card right in light and dark themes.
        self.setStyleSheet(
            "QFrame#dashboardCard { background: palette(base); border: 1px solid palette(mid);"
            " border-radius: 6px; }"
        )
        self.title_label = QLabel(title)
        self.title_label.setWordWrap(True)  # long titles wrap in a narrow dock
        font = self.title_label.font()
        font.setBold(True)
        self.title_label.setFont(font)
        self.body = QVBoxLayout(self)
        self.body.setContentsMargins(10, 8, 10, 8)
        self.body.setSpacing(4)
        self.body.addWidget(self.title_label)
        self._title = title

    @property
    def title(self) -> str:
        return self._title

    def set_title(self, title: str) -> None:
        self._title = title
        self.title_label.setText(title)

    def is_on_screen(self) -> bool:
        """Visible and not scrolled entirely out of its scroll area."""
        return self.isVisible() and not self.visibleRegion().isEmpty()


class MessageCard(Card):
    """A card that says something instead of plotting (e.g. why there is no GPU panel)."""

    def __init__(self, title: str, message: str = "", parent: QWidget | None = None) -> None:
        super().__init__(title, parent)
        self.message = QLabel(message)
        self.message.setWordWrap(True)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.body.addWidget(self.message)

    def set_message(self, message: str) -> None:
        self.message.setText(message)


class PlotCard(Card):
    """A live plot of some columns of one ``SeriesTable`` over up to the last ``window_s`` seconds.

    The x range grows with the data: while the table holds less than ``window_s`` seconds
    the plot shows the smallest of ``SPANS_S`` that covers it (``span``).

    ``y_max`` fixes the y range (percentages); otherwise it follows the data in nice steps,
    never below ``y_floor``. ``byte_values`` plots bytes in the largest fitting binary unit
    and names it in the title.
    """

    def __init__(
        self,
        title: str,
        table: SeriesTable,
        *,
        window_s: float = 300.0,
        y_max: float | None = None,
        y_floor: float = 1.0,
        byte_values: bool = False,
        unit: str = "",
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(title, parent)
        self.table = table
        self.window_s = window_s
        self._base_title = title
        self._unit = unit
        self._y_max = y_max
        self._y_floor = y_floor
        self._byte_values = byte_values
        self._scale = (1, "B")
        self._current_top = math.nan
        self._series: list[Series] = []
        self._items: list[pg.PlotDataItem] = []
        self._legend_text = ""
        self._last_draw = -math.inf
        self._span = math.nan
        self.updates = 0  # how many refreshes reached setData (tests, benchmarks)

        self.legend = QLabel()
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        self.legend.setWordWrap(True)
        self.body.addWidget(self.legend)

        palette = self.palette()
        background = palette.color(QPalette.ColorRole.Base)
        self._foreground = palette.color(QPalette.ColorRole.Text)
        self.plot = StaticPlot(
            background=background,
            axisItems={"bottom": TimeAxis(), "left": ValueAxis()},
        )
        # Fixed: a QGraphicsView's size hint follows its scene and would make every card huge.
        self.plot.setFixedHeight(PLOT_HEIGHT)
        self.plot.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        item = self.plot.getPlotItem()
        # A monitor, not an explorer: no panning, zooming, context menu or auto-range button.
        item.setMenuEnabled(False)
        item.hideButtons()
        item.setMouseEnabled(x=False, y=False)
        item.showGrid(x=True, y=True, alpha=0.18)
        # Room right of the plot for the half of "now" that overhangs its last tick.
        item.layout.setContentsMargins(1, 1, LABEL_OVERHANG_PX // 2, 1)
        for name in ("left", "bottom"):
            axis = item.getAxis(name)
            axis.setTextPen(self._foreground)
            axis.setPen(pg.mkPen(palette.color(QPalette.ColorRole.Mid)))
            # Cached as a pixmap: replaying an axis's text costs more than drawing every curve,
            # and the axes change only when their range does (which invalidates the cache).
            axis.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
        item.disableAutoRange()
        self._set_span(visible_span(0.0, window_s))
        self._update_y_range(-math.inf)
        self.body.addWidget(self.plot, 1)
        self._set_unit_title()

    @property
    def span(self) -> float:
        """Seconds of history the x axis shows now."""
        return self._span

    def _set_span(self, span: float) -> None:
        if span != self._span:
            self._span = span
            # A margin on both sides, so the ends of the curves are not lost against the frame.
            self.plot.getPlotItem().setXRange(-1.02 * span, 0.02 * span, padding=0)

    # -- curves ------------------------------------------------------------------------------

    @property
    def series(self) -> tuple[Series, ...]:
        return tuple(self._series)

    @property
    def items(self) -> tuple[pg.PlotDataItem, ...]:
        return tuple(self._items)

    def add_series(self, series: Series) -> pg.PlotDataItem:
        color = QColor(series.color)
        pen = pg.mkPen(color, width=LINE_WIDTH)
        if series.dashed:
            pen.setStyle(Qt.PenStyle.DashLine)
        kwargs: dict[str, object] = {}
        if series.fill:
            fill = QColor(color)
            fill.setAlpha(50)
            kwargs = {"fillLevel": 0.0, "fillBrush": fill}
        item = pg.PlotDataItem(
            pen=pen,
            name=series.label,
            connect="finite",  # NaN rows (pauses, missing GPU fields) break the line
            antialias=False,  # antialiased paths cost ~5x to paint: the single biggest cost here
            autoDownsample=True,
            autoDownsampleFactor=1.0,  # about one sample (a min/max pair) per pixel
            downsampleMethod="peak",
            clipToView=True,
            **kwargs,
        )
        self.plot.getPlotItem().addItem(item)
        self._series.append(series)
        self._items.append(item)
        return item

    def set_series(self, series: Sequence[Series]) -> None:
        """Replace every curve (e.g. when the set of GPUs or sequences changes)."""
        plot = self.plot.getPlotItem()
        for item in self._items:
            plot.removeItem(item)
        self._series.clear()
        self._items.clear()
        for s in series:
            self.add_series(s)
        self._legend_text = ""
        self._last_draw = -math.inf  # new curves: draw at the next refresh

    def set_y_max(self, y_max: float | None) -> None:
        """Fix the y range to 0..``y_max`` (None: follow the data)."""
        self._y_max = y_max
        self._current_top = math.nan
        self._last_draw = -math.inf

    # -- updates -----------------------------------------------------------------------------

    def refresh(self, now: float, force: bool = False, min_gap_s: float = 0.0) -> bool:
        """Feed the curves the newest history; False when skipped (off screen, or too soon).

        "Too soon" is less time than one pixel of the whole window stands for: with five
        minutes across ~400 pixels the curves move a pixel every ~0.75 s, and redrawing at
        every 250 ms sample would change nothing visible for most of the cost. A plot that
        shows a shorter ``span`` while its table fills keeps that budget (its curves step a
        few pixels a redraw), so a young dashboard costs no more than a full one.
        ``min_gap_s``: redraw no more often than this either (the view's pace while the
        model is busy).
        """
        if not force:
            if not self.is_on_screen():
                return False
            pixels = max(1.0, self.plot.getPlotItem().getViewBox().width())
            if now - self._last_draw < max(min_gap_s, self.window_s / pixels):
                return False
        self._last_draw = now
        times = self.table.times()
        first = int(np.searchsorted(times, now - self.window_s))  # the oldest row still in the window
        self._set_span(visible_span(now - float(times[first]) if first < len(times) else 0.0, self.window_s))
        x = times - now
        columns = [self.table.series(s.column) for s in self._series]
        top = max((finite_max(c) for c in columns), default=-math.inf)
        if self._byte_values:
            self._pick_byte_unit(top)
        divisor = self._scale[0]
        for item, y in zip(self._items, columns, strict=True):
            item.setData(x, y / divisor if divisor != 1 else y)
        self._update_y_range(top / divisor if math.isfinite(top) else top)
        self._update_legend(columns)
        self.updates += 1
        return True

    def _pick_byte_unit(self, top: float) -> None:
        scale = next((u for u in _BYTE_UNITS if math.isfinite(top) and top >= u[0]), _BYTE_UNITS[1])
        if scale != self._scale:
            self._scale = scale
            self._current_top = math.nan  # the numbers on the axis change meaning
            self._set_unit_title()

    def _set_unit_title(self) -> None:
        unit = self._scale[1] if self._byte_values else self._unit
        self.set_title(f"{self._base_title} ({unit})" if unit else self._base_title)
        self._title = self._base_title  # the export names files after the stable title

    def _update_y_range(self, top: float) -> None:
        new_top = self._y_max if self._y_max is not None else nice_ceiling(top * 1.05, self._y_floor)
        if new_top != self._current_top:
            self._current_top = new_top
            # Explicit margins, so the top tick's label (e.g. 100) is not clipped away.
            self.plot.getPlotItem().setYRange(-0.08 * new_top, 1.08 * new_top, padding=0)

    def _update_legend(self, columns: list[np.ndarray]) -> None:
        parts = []
        for s, y in zip(self._series, columns, strict=True):
            value = _last_finite(y)
            text = "–" if value is None else s.fmt(value)
            dash = "┅" if s.dashed else "▬"
            parts.append(f'<span style="color:{s.color}">{dash}</span>&nbsp;{s.label}&nbsp;<b>{text}</b>')
        legend = "&nbsp;&nbsp; ".join(parts)
        if legend != self._legend_text:  # QLabel re-lays out on every setText
            self._legend_text = legend
            self.legend.setText(legend)


def _last_finite(y: np.ndarray) -> float | None:
    # The newest finite value within the last few rows: a gap row or a NaN GPU field at the
    # very end should not blank the legend.
    for v in y[-1:-5:-1]:
        if math.isfinite(v):
            return float(v)
    return None


def byte_fmt(v: float) -> str:
    return format_bytes(v)


__all__ = [
    "COLORS",
    "Card",
    "MessageCard",
    "PlotCard",
    "Series",
    "StaticPlot",
    "TimeAxis",
    "ValueAxis",
    "ago",
    "byte_fmt",
    "color_for",
    "finite_max",
    "fmt_celsius",
    "fmt_count",
    "fmt_percent",
    "fmt_rate",
    "fmt_watts",
    "forward_wheel",
    "nice_ceiling",
    "visible_span",
]
