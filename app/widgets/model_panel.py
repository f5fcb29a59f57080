"""The selected model: what its header says, and the load plan for this machine."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QHideEvent, QShowEvent
from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QFrame,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.settings.load_settings import MAX_CONTEXT, first_request
from app.state.session import SessionState
from app.widgets.context_spin import ContextSpinBox
from app.widgets.load_progress import LoadProgress
from app.widgets.memory_bar import MemoryBar
from app.wording.presenters import (
    BASE_MODEL_BADGE,
    BASE_MODEL_TIP,
    FACT_TIPS,
    elide_middle,
    model_facts,
    sentence,
)
from engine import (
    DEFAULT_CONTEXT_PER_CONVERSATION,
    DEFAULT_MAX_DRAFT,
    MAX_THREADS,
    CpuMeter,
    EngineError,
    HardwareSnapshot,
    KvCacheType,
    LoadPlan,
    LoadRequest,
    ModelInfo,
    SpeculationConfig,
    SpeculationMode,
    Verdict,
    choose_threads,
    format_bytes,
    plan_load,
    with_cpu_load,
)

VERDICT_COLORS = {
    Verdict.FITS: "#2ca02c",
    Verdict.PARTIAL_OFFLOAD: "#e69500",
    Verdict.TIGHT: "#e69500",
    Verdict.DOES_NOT_FIT: "#d62728",
}
AUTO_GPU_LAYERS = -1
AUTO_THREADS = 0  # the threads spin box's "no setting of its own"
CPU_LOAD_INTERVAL_MS = 2000  # how often the panel looks at other programs' CPU load
THREADS_TIP = (
    "CPU threads llama.cpp computes with. Auto takes one per core that other programs "
    "leave free: a thread that has to wait for a busy core holds every other thread up, "
    "so while another program keeps a core busy, fewer threads decode faster."
)
ERROR_STYLE = "color: #d62728;"
NOTE_STYLE = "color: palette(mid);"
WARNING_STYLE = "color: #b36b00;"
BADGE_STYLE = "background: #f6e3b4; color: #6b4a00; border-radius: 9px; padding: 2px 10px;"
NAME_IN_BUTTON = 32  # characters of another model's name on the Load button
WELCOME = (
    "Hearth runs GGUF language models on this computer, offline.\n\n"
    "Add one by dropping .gguf files or whole folders anywhere on this window, or with "
    "Add models… (Ctrl+O). Files stay where they are.\n\n"
    "Where to get models: the Discover page (Ctrl+3) searches the Hugging Face Hub from Hearth and "
    "shows what fits this computer before you download. Small models such as Gemma 3 270M, "
    "Qwen 2.5 0.5B or Llama 3.2 1B run on any laptop; a Q4_K_M file is a good start. "
    "For pictures, also download the model's mmproj file and put it beside the model."
)


class ModelPanel(QWidget):
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
        controls = QFormLayout()
        # Fields at their natural width: on a wide screen a 1,000 px spin box reads badly.
        controls.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.FieldsStayAtSizeHint)
        self.ctx_spin = ContextSpinBox()
        self.ctx_spin.setRange(256, MAX_CONTEXT)
        self.ctx_spin.setSingleStep(1024)
        self.ctx_spin.setValue(DEFAULT_CONTEXT_PER_CONVERSATION)
        self.ctx_spin.setSuffix(" tokens")
        self.ctx_spin.setAccelerated(True)
        self.ctx_hint = QLabel()
        self.ctx_hint.setObjectName("contextHint")
        # One line: a wrapped label under a field held at its size hint was given one
        # line's height and drawn over by the next row.
        ctx_field = QWidget()
        ctx_layout = QVBoxLayout(ctx_field)
        ctx_layout.setContentsMargins(0, 0, 0, 0)
        ctx_layout.setSpacing(2)
        ctx_layout.addWidget(self.ctx_spin, 0, Qt.AlignmentFlag.AlignLeft)
        ctx_layout.addWidget(self.ctx_hint)
        self.parallel_spin = QSpinBox()
        self.parallel_spin.setRange(1, 64)
        self.parallel_spin.setValue(1)
        self.gpu_spin = QSpinBox()
        self.gpu_spin.setRange(AUTO_GPU_LAYERS, 999)
        self.gpu_spin.setSpecialValueText("auto (as many as fit)")
        self.gpu_spin.setValue(AUTO_GPU_LAYERS)
        self.threads_spin = QSpinBox()
        self.threads_spin.setRange(AUTO_THREADS, MAX_THREADS)
        self.threads_spin.setValue(AUTO_THREADS)
        self.threads_spin.setSpecialValueText("auto")
        self.threads_spin.setToolTip(THREADS_TIP)
        self.kv_combo = QComboBox()
        for kv in KvCacheType:
            self.kv_combo.addItem(kv.value, kv)
        self.projector_combo = QComboBox()
        self.speculation_combo = QComboBox()
        self.speculation_combo.setToolTip(
            "Speculative decoding: faster replies, same text. Prompt lookup is free and shines when "
            "the reply repeats the conversation; a draft model is a smaller model with the same vocabulary."
        )
        controls.addRow("Context per conversation", ctx_field)
        controls.addRow("Parallel conversations", self.parallel_spin)
        controls.addRow("GPU layers", self.gpu_spin)
        controls.addRow("CPU threads", self.threads_spin)
        controls.addRow("KV cache type", self.kv_combo)
        controls.addRow("Vision projector", self.projector_combo)
        controls.addRow("Speculative decoding", self.speculation_combo)
        plan_layout.addLayout(controls)

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

        for spin in (self.ctx_spin, self.parallel_spin, self.gpu_spin, self.threads_spin):
            spin.valueChanged.connect(self._replan)
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
        request = self._requests.get(info.path) or remembered or self._default_request(info, projectors)
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

    def current_request(self) -> LoadRequest:
        gpu = self.gpu_spin.value()
        speculation = self.speculation_combo.currentData()
        return LoadRequest(
            context_per_conversation=self.ctx_spin.value(),
            parallel=self.parallel_spin.value(),
            gpu_layers=None if gpu == AUTO_GPU_LAYERS else gpu,
            kv_type=self.kv_combo.currentData(),
            projector=self.projector_combo.currentData(),
            draft=speculation if isinstance(speculation, ModelInfo) else None,
            max_draft=DEFAULT_MAX_DRAFT if speculation == "lookup" else 0,  # the draft model's: its default
            threads=self.threads_spin.value() or None,
            default_threads=self._default_threads,
        )

    def current_speculation(self) -> SpeculationConfig | None:
        choice = self.speculation_combo.currentData()
        if choice == "lookup":
            return SpeculationConfig(SpeculationMode.PROMPT_LOOKUP)
        if isinstance(choice, ModelInfo):
            return SpeculationConfig(SpeculationMode.DRAFT_MODEL, draft_path=choice.path)
        return None

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

    def apply_request(self, request: LoadRequest) -> None:
        """Set every control from a request (one-click fixes, remembered settings), then plan once."""
        self._updating = True
        try:
            self.ctx_spin.setValue(request.context_per_conversation)
            self.parallel_spin.setValue(request.parallel)
            self.gpu_spin.setValue(AUTO_GPU_LAYERS if request.gpu_layers is None else request.gpu_layers)
            self.threads_spin.setValue(request.threads or AUTO_THREADS)
            self.kv_combo.setCurrentIndex(self.kv_combo.findData(request.kv_type))
            projector = request.projector
            index = self.projector_combo.findText(projector.path.name) if projector is not None else 0
            self.projector_combo.setCurrentIndex(max(0, index))
            self.speculation_combo.setCurrentIndex(self._speculation_index(request))
        finally:
            self._updating = False
        self._replan()

    def plan(self) -> LoadPlan | None:
        return self._plan

    # -- internals ----------------------------------------------------------------

    def _default_request(self, info: ModelInfo, projectors: tuple[ModelInfo, ...]) -> LoadRequest:
        return first_request(info, projectors, self.default_gpu_layers(), self.gpu_spin.isEnabled())

    def _speculation_index(self, request: LoadRequest) -> int:
        if request.draft is not None:
            for index in range(self.speculation_combo.count()):
                data = self.speculation_combo.itemData(index)
                if isinstance(data, ModelInfo) and data.path == request.draft.path:
                    return index
        elif request.max_draft:
            return max(0, self.speculation_combo.findData("lookup"))
        return 0

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

    def _show_context_limit(self, typed: int | None = None) -> None:
        info = self._info
        maximum = self.ctx_spin.maximum()
        why = " (the model's training context)" if info is not None and info.context_length else ""
        if typed is None:
            self.ctx_hint.setText(f"Maximum {maximum:,}{why}")
            self.ctx_hint.setStyleSheet(NOTE_STYLE)
        else:
            self.ctx_hint.setText(f"{typed:,} is more than the maximum: set to {maximum:,}{why}.")
            self.ctx_hint.setStyleSheet(WARNING_STYLE)

    def _context_clamped(self, typed: int) -> None:
        self._show_context_limit(typed)

    def _context_changed(self, value: int) -> None:
        if value < self.ctx_spin.maximum():
            self._show_context_limit()

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

    def _show_threads(self, plan: LoadPlan | None) -> None:
        """The spin box's "auto" says what auto means now: the default's, or the planner's."""
        if plan is None:
            text = "auto"
        elif self._default_threads is not None:
            text = f"default ({plan.params.n_threads}, from Settings)"
        else:
            text = f"auto ({plan.params.n_threads})"
        self.threads_spin.setSpecialValueText(text)

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
