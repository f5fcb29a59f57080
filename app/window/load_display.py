"""Where the model stands, shown wherever one looks: the toolbar's badge, the chat header
(who answers, and the load's progress or error under the picker), the Models page's model
panel and its progress, and whether the remote model shown is the one in use."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QLabel

from app.services.model_session import ModelSession
from app.state.session import SessionState
from app.widgets.load_progress import PHASE_LABELS
from app.widgets.model_badge import ModelBadge
from app.widgets.model_panel import ModelPanel
from app.widgets.remote_panel import RemotePanel
from app.window.chats_page import ChatHeader
from engine import LoadPhase


class LoadDisplay:
    """Follows the session's state and load phases. ``answering_changed``: called when the
    header names the answering model again (the chat's notice follows it); ``state_shown``:
    after each state change (the server's panel names the model it serves)."""

    def __init__(
        self,
        session: ModelSession,
        badge: ModelBadge,
        model_panel: ModelPanel,
        remote_panel: RemotePanel,
        header: ChatHeader,
        answering_changed: Callable[[], None],
        state_shown: Callable[[], None],
    ) -> None:
        self.session = session
        self.badge = badge
        self.model_panel = model_panel
        self.remote_panel = remote_panel
        self.header = header
        self._answering_changed = answering_changed
        self._state_shown = state_shown
        session.state_changed.connect(self._on_session_state)
        session.phase_started.connect(self._on_phase_started)
        session.phase_progress.connect(self._on_phase_progress)
        session.phase_finished.connect(model_panel.load_progress.phase_finished)

    def _on_session_state(self, state: SessionState) -> None:
        plan = self.session.plan
        remote = self.session.remote
        self.badge.show_state(state, plan, self.session.speculation, remote.label if remote else None)
        if remote is None:
            self.remote_panel.set_in_use(False)
        self.model_panel.set_session(plan, state)
        if state in (SessionState.READY, SessionState.EMPTY):
            self.header.load_line.clear()
        self.show_answering_model()
        self._state_shown()

    def show_answering_model(self) -> None:
        """The chat header names the model that will answer."""
        model = self.session.ready_model
        remote = self.session.remote
        if remote is not None:
            text = f"{remote.label.name} answers, {remote.label.detail}"
        elif model is not None:
            text = f"{model.plan.model.display_name} answers"
        elif self.session.state is SessionState.LOADING and self.session.plan is not None:
            text = f"Loading {self.session.plan.model.display_name}…"
        else:
            text = "No model loaded: choose one"
        self.header.set_model(text)
        self._answering_changed()

    def _on_phase_started(self, phase: LoadPhase) -> None:
        self.model_panel.load_progress.phase_started(phase)
        self._show_phase(phase, 0.0)

    def _on_phase_progress(self, phase: LoadPhase, fraction: float) -> None:
        self.model_panel.load_progress.phase_progress(phase, fraction)
        self._show_phase(phase, fraction)

    def _show_phase(self, phase: LoadPhase, fraction: float) -> None:
        """In the toolbar and under the chat's picker: the load goes on wherever one looks."""
        label = PHASE_LABELS.get(phase, phase.value)
        self.badge.show_phase(label, fraction)
        plan = self.session.plan
        if plan is not None:
            self.header.load_line.show_phase(plan.model.display_name, label, fraction)


def native_error_label() -> QLabel:
    """Why llama.cpp cannot run here, in the status bar: hidden until a self-check fails."""
    label = QLabel()
    label.setObjectName("nativeError")
    label.setStyleSheet("color: #d62728;")
    label.setWordWrap(True)
    label.setVisible(False)
    return label
