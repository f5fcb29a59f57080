"""The selected model: what its header says, and the load plan for this machine."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
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

from app.presenters import model_facts
from app.widgets.load_progress import LoadProgress
from app.widgets.memory_bar import MemoryBar
from engine import (
    DEFAULT_MAX_DRAFT,
    EngineError,
    HardwareSnapshot,
    KvCacheType,
    LoadPlan,
    LoadRequest,
    ModelInfo,
    SpeculationConfig,
    SpeculationMode,
    Verdict,
    format_bytes,
    plan_load,
)

VERDICT_COLORS = {
    Verdict.FITS: "#2ca02c",
    Verdict.PARTIAL_OFFLOAD: "#e69500",
    Verdict.TIGHT: "#e69500",
    Verdict.DOES_NOT_FIT: "#d62728",
}
AUTO_GPU_LAYERS = -1
WELCOME = (
    "Hearth runs GGUF language models on this computer, offline.\n\n"
    "Add one by dropping .gguf files or whole folders anywhere on this window, or with "
    "Add models… (Ctrl+O). Files stay where they are.\n\n"
    "Where to get models: search Hugging Face for “GGUF”. Small models such as Gemma 3 270M, "
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

        self.facts_box = QGroupBox("Model")
        self.facts_form = QFormLayout(self.facts_box)
        self.facts_form.setLabelAlignment(Qt.AlignmentFlag.AlignRight)

        self.plan_box = QGroupBox("Load plan for this machine")
        plan_layout = QVBoxLayout(self.plan_box)
        controls = QFormLayout()
        self.ctx_spin = QSpinBox()
        self.ctx_spin.setRange(256, 262144)
        self.ctx_spin.setSingleStep(1024)
        self.ctx_spin.setValue(4096)
        self.ctx_spin.setSuffix(" tokens")
        self.ctx_spin.setAccelerated(True)
        self.parallel_spin = QSpinBox()
        self.parallel_spin.setRange(1, 64)
        self.parallel_spin.setValue(1)
        self.gpu_spin = QSpinBox()
        self.gpu_spin.setRange(AUTO_GPU_LAYERS, 999)
        self.gpu_spin.setSpecialValueText("auto (as many as fit)")
        self.gpu_spin.setValue(AUTO_GPU_LAYERS)
        self.kv_combo = QComboBox()
        for kv in KvCacheType:
            self.kv_combo.addItem(kv.value, kv)
        self.projector_combo = QComboBox()
        self.speculation_combo = QComboBox()
        self.speculation_combo.setToolTip(
            "Speculative decoding: faster replies, same text. Prompt lookup is free and shines when "
            "the reply repeats the conversation; a draft model is a smaller model with the same vocabulary."
        )
        controls.addRow("Context per conversation", self.ctx_spin)
        controls.addRow("Parallel conversations", self.parallel_spin)
        controls.addRow("GPU layers", self.gpu_spin)
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

        for spin in (self.ctx_spin, self.parallel_spin, self.gpu_spin):
            spin.valueChanged.connect(self._replan)
        self.kv_combo.currentIndexChanged.connect(self._replan)
        self.projector_combo.currentIndexChanged.connect(self._replan)
        self.speculation_combo.currentIndexChanged.connect(self._replan)
        self.load_button.clicked.connect(self._request_load)
        self.cancel_button.clicked.connect(self.cancel_requested)
        self._show_nothing()

    # -- public -------------------------------------------------------------------

    def set_hardware(self, hardware: HardwareSnapshot) -> None:
        self._hardware = hardware
        self.gpu_spin.setEnabled(hardware.has_usable_gpu)
        self.gpu_spin.setToolTip(
            "Layers to put on the GPU; auto puts as many as fit."
            if hardware.has_usable_gpu
            else (hardware.offload_note or "No usable GPU: every layer runs on the CPU.")
        )
        self._replan()

    def show_model(
        self,
        info: ModelInfo | None,
        projectors: tuple[ModelInfo, ...] = (),
        drafts: tuple[ModelInfo, ...] = (),
        remembered: LoadRequest | None = None,
    ) -> None:
        """Show ``info``; ``drafts`` are library models usable as its draft model;
        ``remembered`` the settings it was last loaded with."""
        self._info = info
        self._projectors = projectors
        if info is None:
            self._show_nothing()
            return
        self.title.setText(info.display_name)
        self.subtitle.setText(str(info.path))
        self._fill_facts(info)
        self._updating = True
        try:
            limit = info.context_length or 262144
            self.ctx_spin.setMaximum(max(256, limit))
            self.ctx_spin.setValue(min(4096, limit))
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
        self.plan_box.setVisible(not info.is_projector)
        if remembered is not None:
            self.apply_request(remembered)
        else:
            self._replan()

    def show_invalid(self, path: str, reason: str) -> None:
        self._info = None
        self.title.setText(path.rsplit("/", 1)[-1])
        self.subtitle.setText(f"Hearth cannot use this file: {reason}")
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
        )

    def current_speculation(self) -> SpeculationConfig | None:
        choice = self.speculation_combo.currentData()
        if choice == "lookup":
            return SpeculationConfig(SpeculationMode.PROMPT_LOOKUP)
        if isinstance(choice, ModelInfo):
            return SpeculationConfig(SpeculationMode.DRAFT_MODEL, draft_path=choice.path)
        return None

    def set_loading(self, loading: bool, status: str = "") -> None:
        """Between Load and ready/failed: the button becomes Cancel, phases show."""
        self.load_button.setEnabled(not loading)
        self.cancel_button.setVisible(loading)
        self.load_status.setStyleSheet("")
        self.load_status.setText(status)
        if loading and self._plan is not None:
            self.load_progress.set_phases(self._plan.phases)
            self.load_progress.setVisible(True)

    def show_load_error(self, message: str) -> None:
        self.set_loading(False)
        self.load_progress.mark_failed()
        self.load_status.setStyleSheet("color: #d62728;")
        self.load_status.setText(message)

    def _request_load(self) -> None:
        if self._plan is not None:
            self.load_requested.emit(self._plan, self.current_speculation())

    def apply_request(self, request: LoadRequest) -> None:
        """Set every control from a request (one-click fixes), then plan once."""
        self._updating = True
        try:
            self.ctx_spin.setValue(request.context_per_conversation)
            self.parallel_spin.setValue(request.parallel)
            self.gpu_spin.setValue(AUTO_GPU_LAYERS if request.gpu_layers is None else request.gpu_layers)
            self.kv_combo.setCurrentIndex(self.kv_combo.findData(request.kv_type))
            if request.projector is not None:
                index = self.projector_combo.findText(request.projector.path.name)
                self.projector_combo.setCurrentIndex(max(0, index))
        finally:
            self._updating = False
        self._replan()

    def plan(self) -> LoadPlan | None:
        return self._plan

    # -- internals ----------------------------------------------------------------

    def _show_nothing(self) -> None:
        self.title.setText("Select a model")
        self.subtitle.setText(WELCOME)
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
            self.facts_form.addRow(label, value_label)
        self.facts_box.setVisible(True)

    def _replan(self) -> None:
        if self._updating:
            return
        info, hardware = self._info, self._hardware
        if info is None or hardware is None or info.is_projector:
            self._set_plan(None)
            return
        try:
            plan = plan_load(info, hardware, self.current_request())
        except EngineError as exc:
            self._set_plan(None)
            self.verdict_label.setText(exc.message)
            return
        self._set_plan(plan)

    def _set_plan(self, plan: LoadPlan | None) -> None:
        self._plan = plan
        while self.suggestions_layout.count():
            item = self.suggestions_layout.takeAt(0)
            if item.widget():
                item.widget().deleteLater()
        self.load_button.setEnabled(plan is not None and plan.fits)
        if plan is None:
            self.verdict_label.clear()
            self.reasons_label.clear()
            self.params_label.clear()
            self.memory_bar.set_devices(())
            self.plan_changed.emit(None)
            return
        color = VERDICT_COLORS[plan.verdict]
        headline = plan.verdict.value.capitalize()
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
