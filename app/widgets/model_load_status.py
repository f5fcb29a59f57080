"""The model page's load row: Load (or Reload, or "Load (replaces …)"), Cancel, the status
line and the load's phases, for the model on this page only (``LoadStatus``, a part of
``ModelPanel``)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
)

from app.state.session import SessionState
from app.widgets.load_progress import LoadProgress
from app.widgets.styles import ERROR_STYLE
from app.wording.presenters import (
    elide_middle,
)
from engine import (
    LoadPlan,
    ModelInfo,
)

__all__ = ["NAME_IN_BUTTON", "LoadStatus"]

NAME_IN_BUTTON = 32  # characters of another model's name on the Load button


class LoadStatus:
    """Mixed into ``ModelPanel``: what the app has loaded, and a load's error kept with the
    page it belongs to."""

    _info: ModelInfo | None
    _plan: LoadPlan | None
    _session: ModelInfo | None
    _session_state: SessionState
    _progress_path: Path | None
    _error: str
    _error_path: Path | None
    _native_error: str | None

    def _build_load_row(self, plan_layout: QVBoxLayout) -> None:
        buttons = QHBoxLayout()
        self.load_button = QPushButton("Load model")
        self.load_button.setDefault(True)
        self.cancel_button = QPushButton("Cancel loading")
        self.cancel_button.setVisible(False)
        self.load_status = QLabel()
        self.load_status.setWordWrap(True)
        self.load_status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        buttons.addWidget(self.load_button)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.load_status, 1)
        plan_layout.addLayout(buttons)
        self.load_progress = LoadProgress()
        self.load_progress.setVisible(False)
        plan_layout.addWidget(self.load_progress)

    def set_session(self, plan: LoadPlan | None, state: SessionState) -> None:
        """What the app has loaded: ``plan`` is the model loading or ready (None when
        empty or failed). Only that model's page shows its status and load phases."""
        if state is SessionState.LOADING and plan is not None and self._session_state is not state:
            self._error, self._error_path = "", None
            self._progress_path = plan.model.path
            self.load_progress.set_phases(plan.phases)
        elif state is SessionState.EMPTY:
            self._progress_path = None
        self._session = plan.model if plan is not None and state is not SessionState.FAILED else None
        self._session_state = state
        self._show_session()

    def show_load_error(self, message: str) -> None:
        """A load failed (or cannot work at all): said on the failed model's page until a
        load starts or the user moves on to another model."""
        failed = self._session_state is SessionState.FAILED
        self._error = message
        self._error_path = self._progress_path if failed else None
        if failed:
            self.load_progress.mark_failed()
        self._show_session()

    def _request_load(self) -> None:
        if self._plan is not None:
            self.load_requested.emit(self._plan, self.current_speculation())

    def _leave_page(self, new_path: Path | None) -> None:
        """A load error stays with the page it was shown on: leaving that page ends it."""
        shown = self._info.path if self._info is not None else None
        if new_path == shown or not self._error:
            return
        if self._error_path is None or self._error_path == shown:
            if self._error_path is not None and self._session_state is SessionState.FAILED:
                self._progress_path = None  # its rows say "failed": part of the same message
            self._error, self._error_path = "", None

    def _show_session(self) -> None:
        """Status line, progress rows and buttons for the model on this page."""
        shown = self._info.path if self._info is not None else None
        session = self._session
        loading = self._session_state is SessionState.LOADING
        here = session is not None and session.path == shown
        elsewhere = session is not None and not here
        error = self._error if self._error and self._error_path in (None, shown) else ""
        if error:
            status, style = error, ERROR_STYLE
        elif here and session is not None:
            name = session.display_name
            status = f"Loading {name}…" if loading else f"Loaded. {name} is ready to chat."
            style = ""
        elif self._native_error:
            status, style = self._native_error, ERROR_STYLE
        else:
            status, style = "", ""
        self.load_status.setText(status)
        self.load_status.setStyleSheet(style)
        self.load_progress.setVisible(shown is not None and self._progress_path == shown)

        fits = self._plan is not None and self._plan.fits
        self.load_button.setEnabled(fits and not loading)
        self.cancel_button.setVisible(loading)
        if elsewhere and session is not None:
            other = session.display_name
            self.load_button.setText(f"Load (replaces {elide_middle(other, NAME_IN_BUTTON)})")
            self.load_button.setToolTip(
                f"{other} is loading: wait for it or cancel it first."
                if loading
                else f"Unloads {other} and loads this model in its place."
            )
            self.cancel_button.setText(f"Cancel loading {elide_middle(other, NAME_IN_BUTTON)}")
        else:
            reload = here and self._session_state is SessionState.READY
            self.load_button.setText("Reload with these settings" if reload else "Load model")
            self.load_button.setToolTip("")
            self.cancel_button.setText("Cancel loading")
