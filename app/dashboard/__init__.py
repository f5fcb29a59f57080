"""The live dashboard: what the machine and the engine are doing, as it happens.

``DashboardView`` is the widget; ``MetricsHistory`` the Qt-free record behind it.
"""

from app.dashboard.export import ExportResult
from app.dashboard.hardware_view import HardwareView, MemoryComparison, compare_memory
from app.dashboard.kv_panel import KvPanel, KvRow, kv_rows
from app.dashboard.metrics import MetricsHistory, SeriesTable, SessionTotals
from app.dashboard.view import DashboardView, StatsSource, TelemetrySource

__all__ = [
    "DashboardView",
    "ExportResult",
    "HardwareView",
    "KvPanel",
    "KvRow",
    "MemoryComparison",
    "MetricsHistory",
    "SeriesTable",
    "SessionTotals",
    "StatsSource",
    "TelemetrySource",
    "compare_memory",
    "kv_rows",
]
