"""The dashboard's Engine section: throughput, requests, the KV cache (table and plot per
sequence), batch fill, the prefix cache and speculation (``EngineCards``, a part of
``DashboardView``)."""

from __future__ import annotations

from app.dashboard import metrics as m
from app.dashboard.cards import Section
from app.dashboard.kv_panel import KvPanel
from app.dashboard.metrics import MetricsHistory, SeriesTable
from app.dashboard.plots import (
    PlotCard,
    Series,
    color_for,
    fmt_count,
    fmt_percent,
    fmt_rate,
)
from engine import EngineStats

__all__ = ["EngineCards"]


class EngineCards:
    """Mixed into ``DashboardView``: builds the cards and follows each ``EngineStats``."""

    history: MetricsHistory
    _kv_layout: tuple[int, int] | None

    def _build_engine(self, eng: SeriesTable, w: float) -> None:
        self.throughput_card = PlotCard("Throughput", eng, window_s=w, unit="tokens/s", y_floor=10)
        self.throughput_card.add_series(Series(m.DECODE_TPS, "Decode", color_for(0), fmt_rate))
        self.throughput_card.add_series(Series(m.PREFILL_TPS, "Prefill", color_for(1), fmt_rate))
        self.requests_card = PlotCard("Requests", eng, window_s=w, y_floor=4)
        self.requests_card.add_series(Series(m.ACTIVE, "Active", color_for(2), fmt_count))
        self.requests_card.add_series(Series(m.QUEUED, "Queued", color_for(3), fmt_count))
        self.kv_panel = KvPanel()
        self.kv_plot_card = PlotCard("KV cells per sequence", eng, window_s=w, y_floor=16)
        self.batch_card = PlotCard("Batch fill", eng, window_s=w, unit="%", y_max=100)
        self.batch_card.add_series(
            Series(m.BATCH_FILL, "Sequences per batch", color_for(4), fmt_percent, fill=True)
        )
        self.batch_card.setToolTip(
            "How many of the sequences the model decodes in parallel were in each batch, on "
            "average over the last two seconds: two replies streaming on four sequences read 50%."
        )
        self.prefix_rate_card = PlotCard("Prefix-cache hit rate", eng, window_s=w, unit="%", y_max=100)
        self.prefix_rate_card.add_series(
            Series(m.PREFIX_HIT_RATE, "Requests that reused a cached prefix", color_for(5), fmt_percent)
        )
        self.reused_card = PlotCard("Prompt tokens reused", eng, window_s=w, unit="tokens", y_floor=10)
        self.reused_card.add_series(
            Series(m.TOKENS_REUSED, "Read from cache this session", color_for(6), fmt_count, fill=True)
        )
        self.speculation_card = PlotCard("Speculation acceptance", eng, window_s=w, unit="%", y_max=100)
        self.speculation_card.add_series(
            Series(m.ACCEPTANCE_RATE, "Drafted tokens accepted", color_for(7), fmt_percent)
        )

        self.engine_section = Section("Engine")
        for card in (self.throughput_card, self.requests_card, self.kv_panel, self.kv_plot_card):
            self.engine_section.cards.add(card)
        for card in (self.batch_card, self.prefix_rate_card, self.reused_card):
            self.engine_section.cards.add(card)
        # Hidden until a draft shows up: most loads have none.
        self.engine_section.cards.add(self.speculation_card, visible=False)

    def _show_engine_stats(self, stats: EngineStats) -> None:
        """The KV table, a plot line per sequence (re-made when the sequences change) and
        the speculation card once a draft has been seen."""
        self.kv_panel.set_stats(stats)
        layout = (len(stats.sequences), stats.n_ctx_per_sequence)
        if layout != self._kv_layout:
            self._kv_layout = layout
            self.kv_plot_card.set_series(
                [
                    Series(m.kv_sequence_column(s.sequence_id), f"#{s.sequence_id}", color_for(s.sequence_id))
                    for s in stats.sequences
                ]
            )
            self.kv_plot_card.set_y_max(float(stats.n_ctx_per_sequence))
        if self.history.speculation_seen:
            self.engine_section.cards.set_card_visible(self.speculation_card, True)
