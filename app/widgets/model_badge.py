"""The loaded model, its settings and its memory, always visible in the toolbar."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QPushButton, QWidget

from app.model_session import SessionState
from engine import LoadPlan, ModelLabel, SpeculationConfig, SpeculationMode, format_bytes


def describe_loaded(plan: LoadPlan, speculation: SpeculationConfig | None) -> str:
    p = plan.params
    parts = [
        plan.model.display_name,
        f"{p.n_seq_max} × {plan.context_per_conversation:,} tokens",
        f"KV {p.type_k.value}",
        format_bytes(plan.total_bytes),
    ]
    if p.n_gpu_layers:
        parts.insert(3, f"{p.n_gpu_layers} GPU layers")
    if plan.request.projector is not None:
        parts.append("vision")
    if speculation is not None and speculation.mode is SpeculationMode.PROMPT_LOOKUP:
        parts.append("prompt lookup")
    elif speculation is not None and speculation.mode is SpeculationMode.DRAFT_MODEL:
        parts.append("draft model")
    return " · ".join(parts)


class ModelBadge(QWidget):
    unload_requested = Signal()
    show_model_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.label = QLabel("No model loaded")
        self.label.setToolTip("Choose a model under Models, then press Load")
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setMaximumWidth(140)
        self.progress.setMaximumHeight(12)
        self.progress.setTextVisible(False)
        self.progress.setVisible(False)
        self.details_button = QPushButton("Details")
        self.details_button.setFlat(True)
        self.details_button.clicked.connect(self.show_model_requested)
        self.unload_button = QPushButton("Unload")
        self.unload_button.setToolTip("Free the model's memory")
        self.unload_button.clicked.connect(self.unload_requested)
        self.unload_button.setVisible(False)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(12, 0, 12, 0)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.progress)
        layout.addWidget(self.details_button)
        layout.addWidget(self.unload_button)

    def show_state(
        self,
        state: SessionState,
        plan: LoadPlan | None,
        speculation: SpeculationConfig | None,
        remote: ModelLabel | None = None,
    ) -> None:
        self.progress.setVisible(state is SessionState.LOADING)
        self.unload_button.setVisible(state is SessionState.READY)
        # A remote model is let go, not unloaded: nothing of it is in this machine's memory.
        self.unload_button.setText("Disconnect" if remote is not None else "Unload")
        if state is SessionState.READY and remote is not None:
            self.label.setText(f"{remote.name} · remote, {remote.detail}")
            self.label.setToolTip(f"Replies stream from {remote.source}")
        elif state is SessionState.READY and plan is not None:
            self.label.setText(describe_loaded(plan, speculation))
            self.label.setToolTip("\n".join(f"{m.device}: {format_bytes(m.total)}" for m in plan.memory))
        elif state is SessionState.LOADING and plan is not None:
            self.label.setText(f"Loading {plan.model.display_name}…")
        elif state is SessionState.FAILED:
            self.label.setText("Loading failed — see Model")
        else:
            self.label.setText("No model loaded")

    def show_phase(self, label: str, fraction: float) -> None:
        self.progress.setValue(int(max(0.0, min(1.0, fraction)) * 1000))
        self.progress.setToolTip(f"{label}: {fraction:.0%}")
