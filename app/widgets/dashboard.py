"""The dashboard lives in the ``app.dashboard`` package; this name is kept for the widgets' namespace."""

from app.dashboard import DashboardView, MetricsHistory

__all__ = ["DashboardView", "MetricsHistory"]
