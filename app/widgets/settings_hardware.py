"""Settings → Hardware: the CPU threads and GPU layers a model starts with when it has no
settings of its own (the Models page's load plan can still change them per model)."""

from __future__ import annotations

from PySide6.QtWidgets import QFormLayout, QLabel, QSpinBox, QVBoxLayout, QWidget

from app.settings.preferences import MAX_THREADS, Preferences
from app.widgets.model_controls import AUTO_GPU_LAYERS
from engine import HardwareSnapshot

AUTO_THREADS = 0  # Preferences' "the planner chooses"
MAX_GPU_LAYERS = 999  # more than any model has: "all of them"


class HardwarePage(QWidget):
    def __init__(
        self, preferences: Preferences, hardware: HardwareSnapshot | None, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.preferences = preferences

        self.threads = QSpinBox()
        self.threads.setObjectName("defaultThreads")
        # More threads than the CPU runs at once only makes them wait for each other.
        most = hardware.logical_cores if hardware is not None else MAX_THREADS
        self.threads.setRange(AUTO_THREADS, max(1, min(MAX_THREADS, most)))
        self.threads.setSpecialValueText("auto (the planner chooses)")
        self.threads.setToolTip("CPU threads that compute a reply, for a model without its own setting")
        self.threads.valueChanged.connect(preferences.set_default_threads)

        self.gpu_layers = QSpinBox()
        self.gpu_layers.setObjectName("defaultGpuLayers")
        self.gpu_layers.setRange(AUTO_GPU_LAYERS, MAX_GPU_LAYERS)
        self.gpu_layers.setSpecialValueText("auto (as many as fit)")
        self.gpu_layers.setToolTip(
            f"Layers put on the GPU for a model without its own setting: 0 keeps it on the CPU, "
            f"{MAX_GPU_LAYERS} puts all of them there"
        )
        self.gpu_layers.valueChanged.connect(self._gpu_layers_changed)

        lines = [
            "These apply to a model without settings of its own; the Models page's load plan "
            "sets them per model."
        ]
        if hardware is not None:
            lines.append(
                f"This machine: {hardware.cpu_name}, {hardware.physical_cores} cores / "
                f"{hardware.logical_cores} threads."
            )
            if not (hardware.has_usable_gpu or hardware.remote_devices):
                lines.append(hardware.offload_note or "No usable GPU: every layer runs on the CPU.")
        self.note = QLabel("\n".join(lines))
        self.note.setWordWrap(True)
        self.note.setEnabled(False)  # the quiet colour

        form = QFormLayout()
        form.addRow("CPU threads", self.threads)
        form.addRow("GPU layers", self.gpu_layers)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.note)
        layout.addStretch(1)
        self.show_settings()

    def show_settings(self) -> None:
        for spin in (self.threads, self.gpu_layers):
            spin.blockSignals(True)
        self.threads.setValue(self.preferences.default_threads())
        layers = self.preferences.default_gpu_layers()
        self.gpu_layers.setValue(AUTO_GPU_LAYERS if layers is None else layers)
        for spin in (self.threads, self.gpu_layers):
            spin.blockSignals(False)

    def _gpu_layers_changed(self, value: int) -> None:
        self.preferences.set_default_gpu_layers(None if value == AUTO_GPU_LAYERS else value)
