"""The selected model: what its header says, and the load plan for this machine.

The panel holds the model shown, its facts and the re-planning; the parts mixed in are
``model_controls`` (the settings), ``model_plan_view`` (the plan) and ``model_load_status``
(Load, Cancel and what the load is doing)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QHideEvent, QShowEvent
from PySide6.QtWidgets import (
    QFormLayout,
    QFrame,
    QGroupBox,
    QLabel,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from app.settings.load_settings import MAX_CONTEXT, first_request
from app.state.session import SessionState
from app.widgets.model_controls import PlanControls
from app.widgets.model_load_status import LoadStatus
from app.widgets.model_plan_view import PlanView
from app.widgets.styles import ERROR_STYLE
from app.wording.presenters import (
    BASE_MODEL_BADGE,
    BASE_MODEL_TIP,
    FACT_TIPS,
    model_facts,
    sentence,
)
from engine import (
    MAX_THREADS,
    CpuMeter,
    EngineError,
    HardwareSnapshot,
    LoadPlan,
    LoadRequest,
    ModelInfo,
    choose_threads,
    plan_load,
    with_cpu_load,
)

CPU_LOAD_INTERVAL_MS = 2000  # how often the panel looks at other programs' CPU load
BADGE_STYLE = "background: #f6e3b4; color: #6b4a00; border-radius: 9px; padding: 2px 10px;"
WELCOME = (
    "Hearth runs GGUF language models on this computer, offline.\n\n"
    "Add one by dropping .gguf files or whole folders anywhere on this window, or with "
    "Add models… (Ctrl+O). Files stay where they are.\n\n"
    "Where to get models: the Discover page (Ctrl+3) searches the Hugging Face Hub from Hearth and "
    "shows what fits this computer before you download. Small models such as Gemma 3 270M, "
    "Qwen 2.5 0.5B or Llama 3.2 1B run on any laptop; a Q4_K_M file is a good start. "
    "For pictures, also download the model's mmproj file and put it beside the model."
)


class ModelPanel(PlanControls, PlanView, LoadStatus, QWidget):
    """Metadata on top, plan controls and the live plan below; re-plans on every change."""

    plan_changed = Signal(object)  # LoadPlan | None
    load_requested = Signal(object, object)  # LoadPlan, SpeculationConfig | None
    cancel_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._info: ModelInfo | None = None
        self._projectors: tuple[ModelInfo, ...] = ()
        self._hardware: HardwareSnapshot | None = None
        self._plan: LoadPlan | None = None
        self._updating = False
        # Each model's settings as last seen on this page, so one model's edits never
        # leak into another's (the store keeps only what a model was loaded with).
        self._requests: dict[Path, LoadRequest] = {}
        # Settings → Hardware's GPU layers for a model never loaded (None: as many as fit).
        self.default_gpu_layers: Callable[[], int | None] = lambda: None
        # The loaded (or loading) model, and whose load the progress rows show.
        self._session: ModelInfo | None = None
        self._session_state = SessionState.EMPTY
        self._progress_path: Path | None = None
        # A load error belongs to the model that failed (None: to none in particular).
        self._error = ""
        self._error_path: Path | None = None
        self._native_error: str | None = None
        # Threads for a model without its own (Settings → Hardware; None: the planner's).
        self._default_threads: int | None = None
        # Other programs' CPU load, followed while the panel is shown (this machine only).
        self._cpu_meter: CpuMeter | None = None
        self._cpu_timer = QTimer(self)
        self._cpu_timer.setInterval(CPU_LOAD_INTERVAL_MS)
        self._cpu_timer.timeout.connect(self._follow_cpu_load)

        self.title = QLabel("Select a model")
        self.title.setObjectName("modelTitle")
        font = self.title.font()
        font.setPointSizeF(font.pointSizeF() * 1.4)
        font.setBold(True)
        self.title.setFont(font)
        self.title.setWordWrap(True)
        self.subtitle = QLabel(WELCOME)
        self.subtitle.setWordWrap(True)
        self.subtitle.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.base_badge = QLabel(BASE_MODEL_BADGE)
        self.base_badge.setObjectName("baseModelBadge")
        self.base_badge.setStyleSheet(BADGE_STYLE)
        self.base_badge.setToolTip(BASE_MODEL_TIP)
        self.base_badge.setVisible(False)

        self.facts_box = QGroupBox("Model")
        self.facts_form = QFormLayout(self.facts_box)
        self.facts_form.setLabelAlignment(Qt.AlignmentFlag.AlignRight)

        self.plan_box = QGroupBox("Load plan for this machine")
        plan_layout = QVBoxLayout(self.plan_box)
        plan_layout.addLayout(self._build_controls())
        self._build_plan_view(plan_layout)
        self._build_load_row(plan_layout)

        body = QWidget()
        body_layout = QVBoxLayout(body)
        body_layout.addWidget(self.title)
        body_layout.addWidget(self.base_badge, 0, Qt.AlignmentFlag.AlignLeft)
        body_layout.addWidget(self.subtitle)
        body_layout.addWidget(self.plan_box)
        body_layout.addWidget(self.facts_box)
        body_layout.addStretch(1)
        scroll = QScrollArea()
        scroll.setWidget(body)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(scroll)

        for spin in (self.ctx_spin, self.parallel_spin, self.pool_spin, self.gpu_spin, self.threads_spin):
            spin.valueChanged.connect(self._replan)
        self.pool_spin.valueChanged.connect(self._pool_changed)
        self.kv_combo.currentIndexChanged.connect(self._replan)
        self.projector_combo.currentIndexChanged.connect(self._replan)
        self.speculation_combo.currentIndexChanged.connect(self._replan)
        self.ctx_spin.clamped.connect(self._context_clamped)
        self.ctx_spin.valueChanged.connect(self._context_changed)
        self.load_button.clicked.connect(self._request_load)
        self.cancel_button.clicked.connect(self.cancel_requested)
        self._show_nothing()

    # -- public -------------------------------------------------------------------

    def set_hardware(self, hardware: HardwareSnapshot) -> None:
        self._hardware = hardware
        self._native_error = hardware.native_error
        if hardware.this_machine and self._cpu_meter is None:
            self.set_cpu_meter(CpuMeter(hardware.cpu_busy_elsewhere))
        offload = hardware.has_usable_gpu or bool(hardware.remote_devices)  # workers' devices too
        self.gpu_spin.setEnabled(offload)
        self.gpu_spin.setToolTip(
            "Layers to put on the GPU (and workers); auto puts as many as fit."
            if offload
            else (hardware.offload_note or "No usable GPU: every layer runs on the CPU.")
        )
        self._replan()
        self._show_session()

    def set_cpu_meter(self, meter: CpuMeter | None) -> None:
        """Follow other programs' CPU load with ``meter`` (None: the snapshot's figure only)."""
        self._cpu_meter = meter
        self._update_cpu_timer()
        self._replan()

    def set_default_threads(self, threads: int) -> None:
        """Threads for a model without its own setting (Settings → Hardware); 0: the planner's."""
        value = threads if 1 <= threads <= MAX_THREADS else None
        if value != self._default_threads:
            self._default_threads = value
            self._replan()

    def show_model(
        self,
        info: ModelInfo | None,
        projectors: tuple[ModelInfo, ...] = (),
        drafts: tuple[ModelInfo, ...] = (),
        remembered: LoadRequest | None = None,
    ) -> None:
        """Show ``info``; ``projectors`` are the library's pairings, best first (the first
        is the default); ``drafts`` library models usable as its draft model;
        ``remembered`` the settings it was last loaded with."""
        self._leave_page(info.path if info is not None else None)
        self._info = info
        self._projectors = projectors
        if info is None:
            self._show_nothing()
            return
        self.title.setText(info.display_name)
        self.subtitle.setText(str(info.path))
        self.base_badge.setVisible(info.is_base_model)
        self._fill_facts(info)
        self._updating = True
        try:
            self.ctx_spin.setMaximum(max(256, info.context_length or MAX_CONTEXT))
            self.gpu_spin.setMaximum((info.block_count or 0) + 1)
            self.projector_combo.clear()
            self.projector_combo.addItem("none", None)
            for proj in projectors:
                self.projector_combo.addItem(proj.path.name, proj)
            self.projector_combo.setEnabled(bool(projectors))
            self.speculation_combo.clear()
            self.speculation_combo.addItem("Off", None)
            self.speculation_combo.addItem("Prompt lookup (no extra memory)", "lookup")
            for draft in drafts:
                self.speculation_combo.addItem(f"Draft model: {draft.display_name}", draft)
        finally:
            self._updating = False
        self._show_context_limit()
        self.plan_box.setVisible(not info.is_projector)
        request = (
            self._requests.get(info.path) or remembered or self._default_request(info, projectors, drafts)
        )
        self.apply_request(request)
        self._show_session()

    def show_invalid(self, path: str, reason: str) -> None:
        self._leave_page(Path(path))
        self._info = None
        self.title.setText(path.rsplit("/", 1)[-1])
        self.subtitle.setText(f"Hearth cannot use this file. {sentence(reason)}")
        self.base_badge.setVisible(False)
        self._clear_facts()
        self.plan_box.setVisible(False)
        self._set_plan(None)

    def plan(self) -> LoadPlan | None:
        return self._plan

    # -- internals ----------------------------------------------------------------

    def _default_request(
        self, info: ModelInfo, projectors: tuple[ModelInfo, ...], drafts: tuple[ModelInfo, ...] = ()
    ) -> LoadRequest:
        return first_request(info, projectors, self.default_gpu_layers(), self.gpu_spin.isEnabled(), drafts)

    def _show_nothing(self) -> None:
        self.title.setText("Select a model")
        self.subtitle.setText(WELCOME)
        self.base_badge.setVisible(False)
        self._clear_facts()
        self.plan_box.setVisible(False)
        self._set_plan(None)

    def _clear_facts(self) -> None:
        while self.facts_form.rowCount():
            self.facts_form.removeRow(0)
        self.facts_box.setVisible(False)

    def _fill_facts(self, info: ModelInfo) -> None:
        self._clear_facts()
        for label, value in model_facts(info):
            value_label = QLabel(value)
            value_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            value_label.setWordWrap(True)
            if label in FACT_TIPS and (label != "Chat template" or info.is_base_model):
                value_label.setToolTip(FACT_TIPS[label])
            self.facts_form.addRow(label, value_label)
        self.facts_box.setVisible(True)

    def _replan(self) -> None:
        if self._updating:
            return
        info, hardware = self._info, self._hardware
        if info is None or hardware is None or info.is_projector:
            self._set_plan(None)
            return
        self._requests[info.path] = self.current_request()
        try:
            plan = plan_load(info, self._hardware_now(hardware), self.current_request())
        except EngineError as exc:
            self._set_plan(None)
            self.verdict_label.setText(exc.message)
            self.verdict_label.setStyleSheet(ERROR_STYLE)
            return
        self._set_plan(plan)

    def _hardware_now(self, hardware: HardwareSnapshot) -> HardwareSnapshot:
        meter = self._cpu_meter
        return with_cpu_load(hardware, meter.others) if meter is not None else hardware

    def _follow_cpu_load(self) -> None:
        """Look at other programs' load; plan again only when it changes the threads (or
        what the plan says about them)."""
        meter, plan, hardware = self._cpu_meter, self._plan, self._hardware
        if meter is None or meter.sample() is None or plan is None or hardware is None:
            return
        choice = choose_threads(self.current_request(), self._hardware_now(hardware))
        said = [r for r in plan.reasons if r.startswith("Threads ")]
        if choice.threads != plan.params.n_threads or said != ([choice.reason] if choice.reason else []):
            self._replan()

    def _update_cpu_timer(self) -> None:
        if self._cpu_meter is not None and self.isVisible():
            self._cpu_timer.start()
        else:
            self._cpu_timer.stop()

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self._update_cpu_timer()

    def hideEvent(self, event: QHideEvent) -> None:
        super().hideEvent(event)
        self._update_cpu_timer()
