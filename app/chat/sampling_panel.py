"""Per-conversation system prompt and sampling settings, with presets."""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from PySide6.QtCore import QRegularExpression, Qt, QTimer, Signal
from PySide6.QtGui import QRegularExpressionValidator
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QFrame,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from engine import DEFAULT_MAX_TOKENS, MAX_SEED, SamplingParams, sampling_field

_ENGINE = SamplingParams()  # the defaults, from the engine: one source for the window and the CLI
SYSTEM_PROMPT_DEBOUNCE_MS = 400


@dataclass(frozen=True)
class SamplingSettings:
    """What one conversation asks of the model. ``seed`` None: a fresh one per reply."""

    system_prompt: str = ""
    temperature: float = _ENGINE.temperature
    top_p: float = _ENGINE.top_p
    top_k: int = _ENGINE.top_k
    min_p: float = _ENGINE.min_p
    repeat_penalty: float = _ENGINE.repeat_penalty
    max_tokens: int = DEFAULT_MAX_TOKENS
    seed: int | None = None

    def to_params(self) -> SamplingParams:
        """The engine's sampling parameters (system prompt and max tokens go elsewhere
        in a ChatRequest)."""
        return SamplingParams(
            temperature=self.temperature,
            top_k=self.top_k,
            top_p=self.top_p,
            min_p=self.min_p,
            repeat_penalty=self.repeat_penalty,
            seed=self.seed,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        """One line, for saying what a reply was written with: ``temperature 0.8 · top-p
        0.95 · top-k 40 · min-p 0.05 · repeat penalty 1.1 · up to 2,048 tokens`` (``· seed 7``)."""
        parts = [
            f"temperature {self.temperature:g}",
            f"top-p {self.top_p:g}",
            f"top-k {self.top_k}",
            f"min-p {self.min_p:g}",
            f"repeat penalty {self.repeat_penalty:g}",
            f"up to {self.max_tokens:,} tokens",
        ]
        if self.seed is not None:
            parts.append(f"seed {self.seed}")
        return " · ".join(parts)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SamplingSettings:
        """Tolerant of settings saved by other versions: unknown keys are ignored and
        missing ones take their defaults."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


class Preset(enum.Enum):
    PRECISE = "Precise"
    BALANCED = "Balanced"
    CREATIVE = "Creative"
    GREEDY = "Greedy (deterministic)"

    @property
    def description(self) -> str:
        return PRESET_DESCRIPTIONS[self]


# Only the sampling knobs: a preset never touches the system prompt, max tokens or seed.
PRESET_VALUES: dict[Preset, dict[str, float | int]] = {
    Preset.PRECISE: {"temperature": 0.2, "top_p": 0.9, "top_k": 40, "min_p": 0.05, "repeat_penalty": 1.1},
    Preset.BALANCED: {  # the engine's defaults
        "temperature": _ENGINE.temperature,
        "top_p": _ENGINE.top_p,
        "top_k": _ENGINE.top_k,
        "min_p": _ENGINE.min_p,
        "repeat_penalty": _ENGINE.repeat_penalty,
    },
    Preset.CREATIVE: {"temperature": 1.0, "top_p": 0.98, "top_k": 100, "min_p": 0.02, "repeat_penalty": 1.05},
    # Temperature 0 is greedy in the engine; the other filters then change nothing, so
    # they are set to "off" to say so.
    Preset.GREEDY: {"temperature": 0.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0, "repeat_penalty": 1.0},
}

PRESET_DESCRIPTIONS: dict[Preset, str] = {
    Preset.PRECISE: "Focused, factual answers; little variation between runs.",
    Preset.BALANCED: "A good default for conversation.",
    Preset.CREATIVE: "More varied wording and ideas; can wander.",
    Preset.GREEDY: "Always the most likely token: the same prompt gives the same reply.",
}


def apply_preset(settings: SamplingSettings, preset: Preset) -> SamplingSettings:
    return replace(settings, **PRESET_VALUES[preset])  # type: ignore[arg-type]


def matching_preset(settings: SamplingSettings) -> Preset | None:
    for preset, values in PRESET_VALUES.items():
        if all(abs(float(getattr(settings, k)) - float(v)) < 1e-9 for k, v in values.items()):
            return preset
    return None


CUSTOM = "Custom"


class SamplingPanel(QWidget):
    """Edits a ``SamplingSettings``; every change emits ``changed`` (the system prompt after
    a short pause in typing). ``set_settings`` shows a conversation's settings silently."""

    changed = Signal(object)  # SamplingSettings

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._settings = SamplingSettings()
        self._updating = False

        self.system_prompt = QPlainTextEdit()
        self.system_prompt.setObjectName("systemPrompt")
        self.system_prompt.setPlaceholderText("You are a helpful assistant.")
        self.system_prompt.setTabChangesFocus(True)
        self.system_prompt.setMinimumHeight(72)
        self.system_prompt.setMaximumHeight(160)

        self.preset = QComboBox()
        self.preset.setObjectName("samplingPreset")
        for p in Preset:
            self.preset.addItem(p.value, p)
            self.preset.setItemData(self.preset.count() - 1, p.description, Qt.ItemDataRole.ToolTipRole)
        self.preset.addItem(CUSTOM, None)
        self.preset_note = QLabel()
        self.preset_note.setWordWrap(True)
        self.preset_note.setEnabled(False)

        # The ranges are the engine's table's (the window's part of each valid range).
        self.temperature = _double("temperature", 0.05, 2, "0 = always the most likely token (greedy)")
        self.top_p = _double("top_p", 0.01, 2, "Keep the fewest tokens whose probabilities add up to this")
        self.top_k = QSpinBox()
        self.top_k.setRange(*(int(v) for v in _window("top_k")))
        self.top_k.setSpecialValueText("off")
        self.top_k.setToolTip("Keep only the k most likely tokens (0 = off)")
        self.min_p = _double("min_p", 0.01, 2, "Drop tokens less likely than this fraction of the top one")
        self.repeat_penalty = _double(
            "repeat_penalty", 0.05, 2, "Above 1 discourages repeating recent tokens"
        )
        self.max_tokens = QSpinBox()
        self.max_tokens.setRange(1, 131072)
        self.max_tokens.setSingleStep(256)
        self.max_tokens.setAccelerated(True)
        self.max_tokens.setToolTip("The longest reply, in tokens")
        self.seed = QLineEdit()
        self.seed.setObjectName("seed")
        self.seed.setPlaceholderText("random")
        self.seed.setClearButtonEnabled(True)
        self.seed.setValidator(QRegularExpressionValidator(QRegularExpression(r"\d{0,10}"), self.seed))
        self.seed.setToolTip("Blank: a new random seed per reply. A number makes sampling repeatable.")
        self.reset_button = QPushButton("Reset to defaults")
        self.reset_button.setFlat(True)

        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.addRow("Preset", self.preset)
        form.addRow("", self.preset_note)
        form.addRow("Temperature", self.temperature)
        form.addRow("Top-p", self.top_p)
        form.addRow("Top-k", self.top_k)
        form.addRow("Min-p", self.min_p)
        form.addRow("Repeat penalty", self.repeat_penalty)
        form.addRow("Max tokens", self.max_tokens)
        form.addRow("Seed", self.seed)

        body = QWidget()
        layout = QVBoxLayout(body)
        title = QLabel("System prompt")
        font = title.font()
        font.setBold(True)
        title.setFont(font)
        sampling_title = QLabel("Sampling")
        sampling_title.setFont(font)
        layout.addWidget(title)
        layout.addWidget(self.system_prompt)
        layout.addSpacing(8)
        layout.addWidget(sampling_title)
        layout.addLayout(form)
        layout.addWidget(self.reset_button, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addStretch(1)
        scroll = QScrollArea()
        scroll.setWidget(body)
        scroll.setWidgetResizable(True)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(scroll)

        self._prompt_timer = QTimer(self)
        self._prompt_timer.setSingleShot(True)
        self._prompt_timer.setInterval(SYSTEM_PROMPT_DEBOUNCE_MS)
        self._prompt_timer.timeout.connect(self._emit)

        self.system_prompt.textChanged.connect(self._prompt_edited)
        self.preset.activated.connect(self._preset_chosen)
        for spin in (self.temperature, self.top_p, self.min_p, self.repeat_penalty):
            spin.valueChanged.connect(self._edited)
        for ispin in (self.top_k, self.max_tokens):
            ispin.valueChanged.connect(self._edited)
        self.seed.textChanged.connect(self._edited)
        self.reset_button.clicked.connect(self.reset)
        self._show(self._settings)

    # -- public -----------------------------------------------------------------------

    def settings(self) -> SamplingSettings:
        return self._settings

    def set_settings(self, settings: SamplingSettings) -> None:
        """Show a conversation's settings (no ``changed`` signal)."""
        self._prompt_timer.stop()
        self._settings = settings
        self._show(settings)

    def apply_preset(self, preset: Preset) -> None:
        self._settings = apply_preset(self._read(), preset)
        self._show(self._settings)
        self.changed.emit(self._settings)

    def reset(self) -> None:
        self._settings = replace(SamplingSettings(), system_prompt=self._settings.system_prompt)
        self._show(self._settings)
        self.changed.emit(self._settings)

    def flush(self) -> None:
        """Emit a pending system-prompt edit now (e.g. before sending a message)."""
        if self._prompt_timer.isActive():
            self._prompt_timer.stop()
            self._emit()

    def current_preset(self) -> Preset | None:
        return matching_preset(self._settings)

    # -- internals --------------------------------------------------------------------

    def _show(self, s: SamplingSettings) -> None:
        self._updating = True
        try:
            if self.system_prompt.toPlainText() != s.system_prompt:
                self.system_prompt.setPlainText(s.system_prompt)
            self.temperature.setValue(s.temperature)
            self.top_p.setValue(s.top_p)
            self.top_k.setValue(s.top_k)
            self.min_p.setValue(s.min_p)
            self.repeat_penalty.setValue(s.repeat_penalty)
            self.max_tokens.setValue(s.max_tokens)
            self.seed.setText("" if s.seed is None else str(s.seed))
            self._show_preset(s)
        finally:
            self._updating = False

    def _show_preset(self, s: SamplingSettings) -> None:
        preset = matching_preset(s)
        self.preset.setCurrentIndex(self.preset.findData(preset) if preset else self.preset.count() - 1)
        self.preset_note.setText(preset.description if preset else "Your own settings.")
        # Greedy decoding ignores these: say so by disabling them rather than pretending.
        greedy = s.temperature == 0.0
        for w in (self.top_p, self.top_k, self.min_p):
            w.setEnabled(not greedy)

    def _read(self) -> SamplingSettings:
        seed_text = self.seed.text().strip()
        # The field takes ten digits; a number past the engine's largest seed is that seed
        # (MAX_SEED: 2**32 - 1 would be llama.cpp's "random").
        seed = min(int(seed_text), MAX_SEED) if seed_text else None
        return SamplingSettings(
            system_prompt=self.system_prompt.toPlainText(),
            temperature=round(self.temperature.value(), 4),
            top_p=round(self.top_p.value(), 4),
            top_k=self.top_k.value(),
            min_p=round(self.min_p.value(), 4),
            repeat_penalty=round(self.repeat_penalty.value(), 4),
            max_tokens=self.max_tokens.value(),
            seed=seed,
        )

    def _edited(self) -> None:
        if self._updating:
            return
        self._settings = self._read()
        self._updating = True
        try:
            self._show_preset(self._settings)
        finally:
            self._updating = False
        self.changed.emit(self._settings)

    def _prompt_edited(self) -> None:
        if not self._updating:
            self._prompt_timer.start()

    def _emit(self) -> None:
        self._settings = self._read()
        self.changed.emit(self._settings)

    def _preset_chosen(self, index: int) -> None:
        preset = self.preset.itemData(index)
        if isinstance(preset, Preset):
            self.apply_preset(preset)
        else:
            self._show_preset(self._settings)  # "Custom" is a state, not a choice


def _window(name: str) -> tuple[float, float]:
    spec = sampling_field(name)
    return spec.window or (spec.low, spec.high)


def _double(name: str, step: float, decimals: int, tip: str) -> QDoubleSpinBox:
    spin = QDoubleSpinBox()
    spin.setRange(*_window(name))
    spin.setSingleStep(step)
    spin.setDecimals(decimals)
    spin.setToolTip(tip)
    return spin
