"""The model page's plan controls: context, parallel conversations, GPU layers, threads,
KV cache type, vision projector and speculative decoding, read as a ``LoadRequest`` and
set from one (``PlanControls``, a part of ``ModelPanel``)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QLabel,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.settings.load_settings import MAX_CONTEXT
from app.widgets.context_spin import ContextSpinBox
from app.widgets.styles import NOTE_STYLE, WARNING_STYLE
from engine import (
    DEFAULT_CONTEXT_PER_CONVERSATION,
    DEFAULT_MAX_DRAFT,
    MAX_THREADS,
    KvCacheType,
    LoadPlan,
    LoadRequest,
    ModelInfo,
    SpeculationConfig,
    SpeculationMode,
)

__all__ = ["AUTO_GPU_LAYERS", "AUTO_THREADS", "NO_POOL", "THREADS_TIP", "PlanControls"]

AUTO_GPU_LAYERS = -1
AUTO_THREADS = 0  # the threads spin box's "no setting of its own"
THREADS_TIP = (
    "CPU threads llama.cpp computes with. Auto takes one per core that other programs "
    "leave free: a thread that has to wait for a busy core holds every other thread up, "
    "so while another program keeps a core busy, fewer threads decode faster."
)


NO_POOL = 0
CONTEXT_LABEL = "Context per conversation"
POOL_LABEL = "Longest conversation"
POOL_TIP = (
    "One KV cache the parallel conversations share. Each may grow to the longest conversation, "
    "but together they hold at most this many tokens; cached turns are dropped (oldest first) "
    "to make room. Eight conversations of up to 32k tokens fit in the memory of 32k. "
    "Without it each conversation reserves its full context, used or not."
)


class PlanControls:
    """Mixed into ``ModelPanel``: builds the controls (each change re-plans there) and
    says what the context box and "auto" threads mean."""

    _info: ModelInfo | None
    _updating: bool
    _default_threads: int | None

    def _build_controls(self) -> QFormLayout:
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
        # 0: each conversation has its own context (llama.cpp's per-sequence KV).
        self.pool_spin = QSpinBox()
        self.pool_spin.setRange(NO_POOL, MAX_CONTEXT * 4)
        self.pool_spin.setSingleStep(4096)
        self.pool_spin.setGroupSeparatorShown(True)
        self.pool_spin.setSpecialValueText("each conversation its own")
        self.pool_spin.setSuffix(" tokens, shared")
        self.pool_spin.setValue(NO_POOL)
        self.pool_spin.setToolTip(POOL_TIP)
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
        controls.addRow(CONTEXT_LABEL, ctx_field)
        controls.addRow("Parallel conversations", self.parallel_spin)
        controls.addRow("Memory for conversations", self.pool_spin)
        self._ctx_label = controls.labelForField(ctx_field)
        controls.addRow("GPU layers", self.gpu_spin)
        controls.addRow("CPU threads", self.threads_spin)
        controls.addRow("KV cache type", self.kv_combo)
        controls.addRow("Vision projector", self.projector_combo)
        controls.addRow("Speculative decoding", self.speculation_combo)
        return controls

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
            kv_pool=self.pool_spin.value() or None,
        )

    def current_speculation(self) -> SpeculationConfig | None:
        choice = self.speculation_combo.currentData()
        if choice == "lookup":
            return SpeculationConfig(SpeculationMode.PROMPT_LOOKUP)
        if isinstance(choice, ModelInfo):
            return SpeculationConfig(SpeculationMode.DRAFT_MODEL, draft_path=choice.path)
        return None

    def apply_request(self, request: LoadRequest) -> None:
        """Set every control from a request (one-click fixes, remembered settings), then plan once."""
        self._updating = True
        try:
            self.ctx_spin.setValue(request.context_per_conversation)
            self.parallel_spin.setValue(request.parallel)
            self.pool_spin.setValue(request.kv_pool or NO_POOL)
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

    def _speculation_index(self, request: LoadRequest) -> int:
        if request.draft is not None:
            for index in range(self.speculation_combo.count()):
                data = self.speculation_combo.itemData(index)
                if isinstance(data, ModelInfo) and data.path == request.draft.path:
                    return index
        elif request.max_draft:
            return max(0, self.speculation_combo.findData("lookup"))
        return 0

    def _pool_changed(self, value: int) -> None:
        """With a shared pool the context box is the longest a conversation may grow."""
        label = self._ctx_label
        if isinstance(label, QLabel):
            label.setText(POOL_LABEL if value else CONTEXT_LABEL)

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

    def _show_threads(self, plan: LoadPlan | None) -> None:
        """The spin box's "auto" says what auto means now: the default's, or the planner's."""
        if plan is None:
            text = "auto"
        elif self._default_threads is not None:
            text = f"default ({plan.params.n_threads}, from Settings)"
        else:
            text = f"auto ({plan.params.n_threads})"
        self.threads_spin.setSpecialValueText(text)
        # Qt drops the spin box's cached size on a new special text but does not tell the
        # layout: without this the longer text was drawn cut ("o (1)").
        self.threads_spin.updateGeometry()
