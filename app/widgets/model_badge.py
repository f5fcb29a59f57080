"""The loaded model, its settings and its memory, always visible in the toolbar."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QMouseEvent
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QPushButton, QWidget

from app.state.session import SessionState
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


PICK_TIP = "Click to choose the model (Ctrl+M)"


class _PickLabel(QLabel):
    """The toolbar's model name: a click opens the model picker, as the chat's does."""

    clicked = Signal()

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton and self.rect().contains(event.position().toPoint()):
            self.clicked.emit()
        super().mouseReleaseEvent(event)


class ModelBadge(QWidget):
    unload_requested = Signal()
    show_model_requested = Signal()
    pick_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.label = _PickLabel("No model loaded")
        self.label.setCursor(Qt.CursorShape.PointingHandCursor)
        self.label.clicked.connect(self.pick_requested)
        self.label.setToolTip(PICK_TIP)
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
            self.label.setToolTip(f"Replies stream from {remote.source}\n{PICK_TIP}")
        elif state is SessionState.READY and plan is not None:
            self.label.setText(describe_loaded(plan, speculation))
            memory = [f"{m.device}: {format_bytes(m.total)}" for m in plan.memory]
            self.label.setToolTip("\n".join([*memory, PICK_TIP]))
        elif state is SessionState.LOADING and plan is not None:
            self.label.setText(f"Loading {plan.model.display_name}…")
        elif state is SessionState.FAILED:
            self.label.setText("Loading failed — see Model")
        else:
            self.label.setText("No model loaded")
            self.label.setToolTip(PICK_TIP)

    def show_phase(self, label: str, fraction: float) -> None:
        self.progress.setValue(int(max(0.0, min(1.0, fraction)) * 1000))
        self.progress.setToolTip(f"{label}: {fraction:.0%}")
