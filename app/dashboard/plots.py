"""Live time-series cards: a title, a legend that doubles as the current values, a pyqtgraph plot.

Cheap by construction, because they redraw several times a second beside a decoding model:
- every curve is one ``PlotDataItem`` created once and fed ``setData`` with numpy views of
  the history's ring buffers (the only allocation is ``times - now``);
- the x axis is "seconds before now" over a fixed window with static ticks, and the y range
  moves only in nice steps, so the axes' cached pictures are rarely regenerated;
- a card scrolled out of sight (or on a hidden tab) skips its update entirely.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QFrame, QGraphicsItem, QLabel, QSizePolicy, QVBoxLayout, QWidget

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


class TimeAxis(pg.AxisItem):
    """Bottom axis in "seconds before now", ticks fixed once for the window: −5 min … now."""

    def __init__(self, window_s: float, **kwargs: object) -> None:
        super().__init__("bottom", **kwargs)
        major_step = 60 if window_s > 180 else (30 if window_s > 90 else 10)
        minor_step = major_step / 2 if major_step > 10 else 5
        major = [(-k * major_step, _ago(k * major_step)) for k in range(int(window_s // major_step) + 1)]
        minor = [(-k * minor_step, "") for k in range(int(window_s // minor_step) + 1)]
        self.setTicks([major, minor])


def _ago(seconds: float) -> str:
    if seconds == 0:
        return "now"
    if seconds % 60 == 0:
        return f"−{int(seconds // 60)} min"
    return f"−{int(seconds)} s"


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
    """A live plot of some columns of one ``SeriesTable`` over the last ``window_s`` seconds.

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
        self.updates = 0  # how many refreshes reached setData (tests, benchmarks)

        self.legend = QLabel()
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        self.legend.setWordWrap(True)
        self.body.addWidget(self.legend)

        palette = self.palette()
        background = palette.color(QPalette.ColorRole.Base)
        self._foreground = palette.color(QPalette.ColorRole.Text)
        self.plot = pg.PlotWidget(
            background=background,
            axisItems={"bottom": TimeAxis(window_s), "left": ValueAxis()},
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
        for name in ("left", "bottom"):
            axis = item.getAxis(name)
            axis.setTextPen(self._foreground)
            axis.setPen(pg.mkPen(palette.color(QPalette.ColorRole.Mid)))
            # Cached as a pixmap: replaying an axis's text costs more than drawing every curve,
            # and the axes change only when their range does (which invalidates the cache).
            axis.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
        # Margins on both sides, so the "−5 min" and "now" labels at the ends are not clipped.
        item.setXRange(-1.04 * window_s, 0.04 * window_s, padding=0)
        item.disableAutoRange()
        self._update_y_range(-math.inf)
        self.body.addWidget(self.plot, 1)
        self._set_unit_title()

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

    def refresh(self, now: float, force: bool = False) -> bool:
        """Feed the curves the newest history; False when skipped (off screen, or too soon).

        "Too soon" is less time than one pixel of the x axis stands for: with five minutes
        across ~400 pixels the curves move a pixel every ~0.75 s, and redrawing at every
        250 ms sample would change nothing visible for most of the cost.
        """
        if not force:
            if not self.is_on_screen():
                return False
            pixels = max(1.0, self.plot.getPlotItem().getViewBox().width())
            if now - self._last_draw < self.window_s / pixels:
                return False
        self._last_draw = now
        times = self.table.times()
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
    "TimeAxis",
    "ValueAxis",
    "byte_fmt",
    "color_for",
    "finite_max",
    "fmt_celsius",
    "fmt_count",
    "fmt_percent",
    "fmt_rate",
    "fmt_watts",
    "nice_ceiling",
]
