"""The line atop the dashboard: which model, and what the engine is doing now."""

from __future__ import annotations

import html

from app.dashboard.metrics import MetricsHistory
from engine import LoadPlan, format_count

__all__ = ["status_text"]


def status_text(model: object | None, history: MetricsHistory) -> str:
    """``No model loaded``, ``<name>: loading…``, or the model in bold with its requests,
    decode rate, KV use and prefix hits."""
    if model is None:
        return "No model loaded"
    plan = getattr(model, "plan", None)
    name = plan.model.name if isinstance(plan, LoadPlan) and plan.model.name else "Model"
    if not getattr(model, "is_ready", True):
        return f"{name}: loading…"
    stats = history.latest_stats
    if stats is None:
        return f"{name}: waiting for the engine's first statistics…"
    parts = [
        f"<b>{html.escape(name)}</b>",
        f"{stats.active_requests} active",
        f"{stats.queue_depth} queued",
        f"decode {format_count(round(stats.decode_tokens_per_second))} tok/s",
    ]
    if stats.n_ctx:
        parts.append(f"KV {100 * stats.cells_used / stats.n_ctx:.0f}% used")
    if stats.drafting_with:
        parts.append(f"drafting with {html.escape(stats.drafting_with)}")
    rate = history.totals.prefix_hit_rate
    if rate is not None:
        parts.append(f"prefix hits {100 * rate:.0f}%")
    # No-break spaces inside each part: a narrow dock wraps between "decode 32 tok/s"
    # and the next part, never inside it.
    text = " · ".join([parts[0], *(p.replace(" ", "\u00a0") for p in parts[1:])])
    if stats.draft_note:
        text += f"<br>{html.escape(stats.draft_note)}"
    return text
