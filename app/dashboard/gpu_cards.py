"""The dashboard's GPU section: utilisation, VRAM, temperature and power per NVIDIA GPU,
or a card that says why there are none (``GpuCards``, a part of ``DashboardView``)."""

from __future__ import annotations

from app.dashboard import metrics as m
from app.dashboard.cards import Section
from app.dashboard.metrics import MetricsHistory, SeriesTable
from app.dashboard.plots import (
    MessageCard,
    PlotCard,
    Series,
    byte_fmt,
    color_for,
    fmt_celsius,
    fmt_percent,
    fmt_watts,
)
from engine import DeviceType, HardwareSnapshot

__all__ = ["GpuCards"]


class GpuCards:
    """Mixed into ``DashboardView``: builds the cards and follows the GPUs telemetry sees."""

    history: MetricsHistory
    telemetry: object
    gpu_section: Section
    _snapshot: HardwareSnapshot | None
    _gpu_layout: tuple[int, ...] | None

    def _build_gpu(self, tel: SeriesTable, w: float) -> None:
        self.gpu_message = MessageCard("NVIDIA GPU")
        self.gpu_util_card = PlotCard("GPU utilisation", tel, window_s=w, unit="%", y_max=100)
        self.gpu_vram_card = PlotCard("VRAM", tel, window_s=w, byte_values=True)
        self.gpu_temp_card = PlotCard("GPU temperature", tel, window_s=w, unit="°C", y_floor=50)
        self.gpu_power_card = PlotCard("GPU power", tel, window_s=w, unit="W", y_floor=50)
        self.gpu_cards = (self.gpu_util_card, self.gpu_vram_card, self.gpu_temp_card, self.gpu_power_card)
        self.gpu_section = Section("GPU")
        self.gpu_section.cards.add(self.gpu_message, wide=True)
        for card in self.gpu_cards:
            self.gpu_section.cards.add(card)

    def _update_gpu_panel(self) -> None:
        """Plots per GPU when telemetry sees one, else a card that says why there is none."""
        indices = self.history.gpu_indices
        # None until the first sample, so that sample always settles the panel.
        self._gpu_layout = indices if len(self.history.telemetry) else None
        snapshot = self._snapshot
        has_gpus = bool(indices)
        if not has_gpus:
            self.gpu_message.set_message(self._no_gpu_message())
        else:
            util, vram, temp, power = [], [], [], []
            for i in indices:
                color = color_for(i)
                util.append(Series(m.gpu_column(i, "utilization_percent"), f"GPU {i}", color, fmt_percent))
                vram.append(
                    Series(m.gpu_column(i, "vram_used_bytes"), f"GPU {i} used", color, byte_fmt, fill=True)
                )
                vram.append(
                    Series(
                        m.gpu_column(i, "vram_total_bytes"), f"GPU {i} total", color, byte_fmt, dashed=True
                    )
                )
                temp.append(Series(m.gpu_column(i, "temperature_c"), f"GPU {i}", color, fmt_celsius))
                power.append(Series(m.gpu_column(i, "power_w"), f"GPU {i}", color, fmt_watts))
            for card, series in zip(self.gpu_cards, (util, vram, temp, power), strict=True):
                card.set_series(series)
        grid = self.gpu_section.cards
        grid.set_card_visible(self.gpu_message, not has_gpus)
        for card in self.gpu_cards:
            grid.set_card_visible(card, has_gpus)
        # A GPU this llama.cpp build cannot use still shows its plots (they are real), with the reason.
        note = snapshot.offload_note if snapshot is not None and has_gpus else None
        self.gpu_section.note.setText(note or "")
        self.gpu_section.note.setVisible(bool(note))

    def _no_gpu_message(self) -> str:
        snapshot = self._snapshot
        expected = bool(snapshot is not None and snapshot.gpus) or getattr(self.telemetry, "gpu_count", 0) > 0
        if expected and not len(self.history.telemetry):
            return "Reading the GPUs…"
        if snapshot is not None and not snapshot.gpus:
            reason = snapshot.gpu_status
        else:  # the snapshot saw GPUs but live telemetry cannot read them, or there is no snapshot
            reason = getattr(self.telemetry, "gpu_status", None) or "No NVIDIA GPU was found"
        reason = reason.rstrip(".") + "."
        others = [
            d.name
            for d in (snapshot.backend_devices if snapshot is not None else ())
            if d.type in (DeviceType.GPU, DeviceType.IGPU)
        ]
        if others and snapshot is not None and snapshot.gpu_offload_supported:
            # e.g. a Vulkan or Metal build: llama.cpp offloads, but NVML sees only NVIDIA GPUs.
            return (
                f"{reason} llama.cpp can offload to {', '.join(others)}; only NVIDIA GPUs are plotted here."
            )
        return f"{reason} Models run on the CPU; the System plots above show their load."
