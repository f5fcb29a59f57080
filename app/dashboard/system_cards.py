"""The dashboard's System section: CPU (Hearth against other programs), memory and
Hearth's own memory (with the embedding model while one is open), and the note while other
programs keep the CPU busy (``SystemCards``, a part of ``DashboardView``)."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel

from app.dashboard import metrics as m
from app.dashboard.cards import Section
from app.dashboard.metrics import SeriesTable
from app.dashboard.plots import (
    PlotCard,
    Series,
    byte_fmt,
    color_for,
    fmt_percent,
)
from engine import TelemetrySample, format_bytes

__all__ = ["OTHERS_NOTE_OFF_PERCENT", "OTHERS_NOTE_ON_PERCENT", "SystemCards", "cpu_summary", "embedder_text"]

# Other programs' share of the whole CPU at which the System section says so (and below
# which it stops): on 2 cores, one program keeping a core busy is 50%.
OTHERS_NOTE_ON_PERCENT = 25.0
OTHERS_NOTE_OFF_PERCENT = 15.0


def cpu_summary(sample: TelemetrySample) -> str:
    """ "CPU 100% · Hearth 3% · other programs 97%" (just "CPU 40%" from a source that
    cannot tell Hearth apart)."""
    text = f"CPU {sample.cpu_percent:.0f}%"
    hearth, others = sample.hearth_cpu_percent, sample.others_cpu_percent
    if hearth is None or others is None:
        return text
    return f"{text} · Hearth {hearth:.0f}% · other programs {others:.0f}%"


def embedder_text(name: str, memory: int) -> str:
    """ "Embedding model: all-MiniLM-L6-v2 · 123.1 MiB" (the engine's estimate of its memory)."""
    return f"Embedding model: {name} · {format_bytes(memory)}"


class SystemCards:
    """Mixed into ``DashboardView``: builds the cards and keeps the other-programs note."""

    system_section: Section
    _others_noted: bool

    def _build_system(self, tel: SeriesTable, w: float) -> None:
        self.cpu_card = PlotCard("CPU", tel, window_s=w, unit="%", y_max=100)
        self.cpu_card.add_series(Series(m.CPU_PERCENT, "All cores", color_for(0), fmt_percent, fill=True))
        self.cpu_card.add_series(Series(m.HEARTH_CPU_PERCENT, "Hearth", color_for(1), fmt_percent))
        self.cpu_card.add_series(
            Series(m.OTHERS_CPU_PERCENT, "Other programs", color_for(3), fmt_percent, dashed=True)
        )
        self.cpu_card.setToolTip(
            "The whole CPU, and who uses it: Hearth (this window, its models and server) and "
            "every other program together."
        )
        self._others_noted = False
        self.memory_card = PlotCard("Memory", tel, window_s=w, byte_values=True)
        self.memory_card.add_series(Series(m.RAM_USED, "Used", color_for(0), byte_fmt, fill=True))
        self.memory_card.add_series(Series(m.RAM_TOTAL, "Total", color_for(9), byte_fmt, dashed=True))
        self.process_card = PlotCard("Hearth's memory", tel, window_s=w, byte_values=True)
        self.process_card.add_series(
            Series(m.PROCESS_RSS, "Resident (RSS)", color_for(1), byte_fmt, fill=True)
        )
        # The embedding model while the documents hold one open (its memory is part of the RSS).
        self.embedder_line = QLabel()
        self.embedder_line.setObjectName("embedderLine")
        self.embedder_line.setWordWrap(True)
        self.embedder_line.setVisible(False)
        self.process_card.body.addWidget(self.embedder_line)
        self.system_section = Section("System")
        for card in (self.cpu_card, self.memory_card, self.process_card):
            self.system_section.cards.add(card)

    def set_embedder(self, name: str | None, memory: int = 0) -> None:
        """The embedding model open now (its name and the engine's estimate), or None: hidden."""
        if name is None:
            self.embedder_line.clear()
            self.embedder_line.setVisible(False)
            return
        self.embedder_line.setText(embedder_text(name, memory))
        self.embedder_line.setToolTip(
            "The documents' embedding model, open while collections are indexed or searched; "
            "its memory is the planner's estimate, part of Hearth's resident memory."
        )
        self.embedder_line.setVisible(True)

    def _note_other_programs(self, sample: TelemetrySample) -> None:
        """Say so while other programs keep the CPU busy: it is why replies are slow then.
        Hysteresis, so a load near the line does not blink the note on and off."""
        others = sample.others_cpu_percent
        if others is None:
            return
        threshold = OTHERS_NOTE_OFF_PERCENT if self._others_noted else OTHERS_NOTE_ON_PERCENT
        noted = others >= threshold
        if noted:
            text = cpu_summary(sample) + ": other programs are using the CPU, so replies are slower."
            if text != self.system_section.note.text():
                self.system_section.note.setText(text)
        if noted != self._others_noted:
            self._others_noted = noted
            self.system_section.note.setVisible(noted)
