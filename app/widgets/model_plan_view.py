"""The model page's plan: the verdict, the memory bar, the reasons, one-click fixes and
the llama.cpp parameters (``PlanView``, a part of ``ModelPanel``)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.widgets.memory_bar import MemoryBar
from engine import (
    LoadPlan,
    Verdict,
    format_bytes,
)

__all__ = ["VERDICT_COLORS", "PlanView"]

VERDICT_COLORS = {
    Verdict.FITS: "#2ca02c",
    Verdict.PARTIAL_OFFLOAD: "#e69500",
    Verdict.TIGHT: "#e69500",
    Verdict.DOES_NOT_FIT: "#d62728",
}


class PlanView:
    """Mixed into ``ModelPanel``: shows the plan made for the settings above it."""

    _plan: LoadPlan | None

    def _build_plan_view(self, plan_layout: QVBoxLayout) -> None:
        self.verdict_label = QLabel()
        self.verdict_label.setObjectName("verdict")
        self.verdict_label.setWordWrap(True)
        vfont = self.verdict_label.font()
        vfont.setBold(True)
        self.verdict_label.setFont(vfont)
        self.memory_bar = MemoryBar()
        self.reasons_label = QLabel()
        self.reasons_label.setWordWrap(True)
        self.reasons_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.params_label = QLabel()
        self.params_label.setWordWrap(True)
        self.params_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.suggestions_box = QWidget()
        self.suggestions_layout = QVBoxLayout(self.suggestions_box)
        self.suggestions_layout.setContentsMargins(0, 0, 0, 0)
        plan_layout.addWidget(self.verdict_label)
        plan_layout.addWidget(self.memory_bar)
        plan_layout.addWidget(self.reasons_label)
        plan_layout.addWidget(self.suggestions_box)
        plan_layout.addWidget(self.params_label)

    def _set_plan(self, plan: LoadPlan | None) -> None:
        self._plan = plan
        self._show_threads(plan)
        while self.suggestions_layout.count():
            widget = self.suggestions_layout.takeAt(0).widget()
            if widget is not None:
                widget.hide()  # until the event loop deletes it
                widget.deleteLater()
        self._show_session()
        if plan is None:
            self.verdict_label.clear()
            self.reasons_label.clear()
            self.params_label.clear()
            self.memory_bar.set_devices(())
            self.plan_changed.emit(None)
            return
        color = VERDICT_COLORS[plan.verdict]
        headline = plan.headline[:1].upper() + plan.headline[1:]  # not capitalize(): "GiB" stays
        if plan.limiting_resource and plan.deficit:
            headline += f" — {plan.limiting_resource} short by {format_bytes(plan.deficit)}"
        headline += f" · {format_bytes(plan.total_bytes)} in all"
        self.verdict_label.setText(headline)
        self.verdict_label.setStyleSheet(f"color: {color};")
        self.memory_bar.set_devices(plan.memory)
        self.reasons_label.setText("\n".join(f"• {r}" for r in plan.reasons))
        self.reasons_label.setVisible(bool(plan.reasons))
        for suggestion in plan.suggestions:
            button = QPushButton(f"Fix: {suggestion.description}")
            button.setToolTip("Apply this change to the settings above")
            button.clicked.connect(lambda _=False, s=suggestion: self.apply_request(s.request))
            row = QHBoxLayout()
            row.addWidget(button)
            row.addStretch(1)
            holder = QWidget()
            holder.setLayout(row)
            row.setContentsMargins(0, 0, 0, 0)
            self.suggestions_layout.addWidget(holder)
        p = plan.params
        self.params_label.setText(
            f"llama.cpp: n_ctx {p.n_ctx} ({p.n_ctx_seq} per conversation), "
            f"n_seq_max {p.n_seq_max}, n_batch {p.n_batch}, n_ubatch {p.n_ubatch}, "
            f"GPU layers {p.n_gpu_layers}, KV {p.type_k.value}/{p.type_v.value}, "
            f"flash attention {'on' if p.flash_attn else 'auto'}, threads {p.n_threads}"
        )
        self.plan_changed.emit(plan)
