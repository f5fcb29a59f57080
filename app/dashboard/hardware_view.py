"""The machine as Hearth sees it, and the last load's predicted memory beside what it took."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtGui import QFontMetrics, QResizeEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFormLayout,
    QHeaderView,
    QLabel,
    QScrollArea,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.dashboard.plots import Card
from app.widgets.memory_bar import MemoryBar
from engine import HardwareSnapshot, LoadPlan, ReportedMemory, format_bytes

NOTE_STYLE = "color: #b36b00;"  # amber that reads on light and dark backgrounds
_SHORT_TEXT_ROLE = Qt.ItemDataRole.UserRole + 1  # what a cell says when its column is narrow
_PADDING = 16


@dataclass(frozen=True)
class MemoryComparison:
    """One kind of memory: what the planner predicted and what the load actually took."""

    label: str
    predicted: int
    reported: int | None  # None: llama.cpp does not report this part

    @property
    def difference(self) -> int | None:
        return None if self.reported is None else self.reported - self.predicted


def compare_memory(plan: LoadPlan, reported: ReportedMemory | None) -> tuple[MemoryComparison, ...]:
    """Rows for every part that was predicted or reported, and a total.

    Predictions are summed over devices, like llama.cpp's buffers over buffer names:
    per-device attribution of buffer names (CPU_Mapped, CUDA_Host...) is not exact.
    """
    predicted = {
        # llama.cpp's model buffers: the mapped file and the CPU_REPACK copy together.
        "Weights": sum(m.weights + m.repack for m in plan.memory),
        "KV cache": sum(m.kv_cache for m in plan.memory),
        "Compute": sum(m.compute for m in plan.memory),
        "Output": sum(m.output for m in plan.memory),
        "Projector": sum(m.projector for m in plan.memory),
        "Draft model": sum(m.draft for m in plan.memory),
        # Vocabulary tables and working set: real memory that llama.cpp logs no line for.
        "Runtime": sum(m.runtime for m in plan.memory),
    }
    actual: dict[str, int | None] = dict.fromkeys(predicted)
    if reported is not None:
        actual.update(
            {
                "Weights": reported.model_total,
                "KV cache": reported.kv_total,
                "Compute": reported.compute_total,
                "Output": reported.output_total,
                "Projector": (reported.projector_model + reported.projector_compute_total) or None,
            }
        )
    rows = [
        MemoryComparison(label, predicted[label], actual[label])
        for label in predicted
        if predicted[label] or actual[label]
    ]
    known = [r.reported for r in rows if r.reported is not None]
    total_reported = sum(known) if reported is not None and known else None
    rows.append(MemoryComparison("Total", sum(predicted.values()), total_reported))
    return tuple(rows)


def snapshot_rows(snapshot: HardwareSnapshot) -> list[tuple[str, str]]:
    """(label, value) pairs for the machine card."""
    s = snapshot
    gpus = "\n".join(
        f"GPU {g.index}: {g.name}, {format_bytes(g.vram_total)} VRAM ({format_bytes(g.vram_free)} free)"
        for g in s.gpus
    )
    devices = "\n".join(
        f"{d.name} ({d.type.name}): {d.description}"
        + (
            f", {format_bytes(d.memory_free)} free of {format_bytes(d.memory_total)}"
            if d.memory_total
            else ""
        )
        for d in s.backend_devices
    )
    return [
        ("CPU", s.cpu_name),
        ("Cores", f"{s.physical_cores} cores, {s.logical_cores} threads"),
        ("CPU features", ", ".join(s.cpu_simd) if s.cpu_simd else "none detected"),
        ("RAM", f"{format_bytes(s.ram_total)} total, {format_bytes(s.ram_available)} available at start"),
        ("GPUs", f"{s.gpu_status}\n{gpus}" if gpus else s.gpu_status),
        ("NVIDIA driver", s.driver_version or "—"),
        ("llama.cpp build", _build_summary(s)),
        ("Backend devices", devices or "—"),
    ]


def _build_summary(s: HardwareSnapshot) -> str:
    if s.native_error is not None:
        return f"Unusable: {s.native_error}"
    lines = [
        "GPU offload supported" if s.gpu_offload_supported else "CPU only (no GPU offload)",
        f"Compiled for: {', '.join(s.simd) if s.simd else 'no SIMD features'}",
    ]
    if s.simd_not_compiled:
        lines.append(f"Left out: {', '.join(s.simd_not_compiled)}")
    return "\n".join(lines)


def _selectable(text: str) -> QLabel:
    label = QLabel(text)
    label.setWordWrap(True)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


def difference_texts(row: MemoryComparison) -> tuple[str, str]:
    """(wide, narrow) text of the Difference column: "+2.5 MiB (+3%)" and "+3%"."""
    difference = row.difference
    if difference is None:
        return "—", "—"
    amount = f"{'+' if difference >= 0 else '−'}{format_bytes(abs(difference))}"
    if not row.predicted:
        return amount, amount
    share = f"{100 * difference / row.predicted:+.0f}%".replace("-", "−")
    return f"{amount} ({share})", share


class _MemoryTable(QTableWidget):
    """Predicted against reported memory; the Difference column shortens itself when narrow."""

    def __init__(self) -> None:
        super().__init__(0, 4)
        self._widest = 0  # the widest full Difference text, in pixels
        self.short = False

    def set_widest(self, pixels: int) -> None:
        self._widest = pixels
        self._fit_texts()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit_texts()

    def _fit_texts(self) -> None:
        # Stretched columns share what the label column leaves.
        per_column = (self.viewport().width() - self.horizontalHeader().sectionSize(0)) / 3
        short = per_column < self._widest + _PADDING
        if short == self.short:
            return
        self.short = short
        for r in range(self.rowCount()):
            item = self.item(r, 3)
            if item is not None:
                wide = item.toolTip()
                item.setText(item.data(_SHORT_TEXT_ROLE) if short else wide)


class HardwareView(QScrollArea):
    """Static facts about this machine and the llama.cpp build; the last load's memory."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWidgetResizable(True)
        self.setFrameShape(QScrollArea.Shape.NoFrame)
        content = QWidget()
        layout = QVBoxLayout(content)
        layout.setContentsMargins(8, 8, 8, 8)
        layout.setSpacing(8)

        self.machine_card = Card("This machine")
        self.machine_form = QFormLayout()
        self.machine_form.setLabelAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignTop)
        # Labels above their values once the values would be squeezed into a thin column.
        self.machine_form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
        self.machine_card.body.addLayout(self.machine_form)
        self.machine_note = _selectable("")
        self.machine_note.setStyleSheet(NOTE_STYLE)
        self.machine_note.setVisible(False)
        self.machine_card.body.addWidget(self.machine_note)
        self.machine_form.addRow(_selectable("Looking at this machine…"))

        self.load_card = Card("Last load: predicted vs actual memory")
        self.load_summary = _selectable("No model loaded yet.")
        self.memory_bar = MemoryBar()
        self.memory_bar.setVisible(False)
        self.memory_table = _MemoryTable()
        self.memory_table.setHorizontalHeaderLabels(["", "Predicted", "Reported", "Difference"])
        reported_header = self.memory_table.horizontalHeaderItem(2)
        reported_header.setToolTip("Reported by llama.cpp: the buffer sizes it logged while loading")
        self.memory_table.verticalHeader().setVisible(False)
        self.memory_table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.memory_table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.memory_table.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.memory_table.setShowGrid(False)
        self.memory_table.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.memory_table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        # Set once per load, so measuring the labels costs nothing while sampling.
        self.memory_table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        self.memory_table.setVisible(False)
        self.rss_label = _selectable("")
        self.rss_label.setVisible(False)
        self.load_card.body.addWidget(self.load_summary)
        self.load_card.body.addWidget(self.memory_bar)
        self.load_card.body.addWidget(self.memory_table)
        self.load_card.body.addWidget(self.rss_label)

        layout.addWidget(self.machine_card)
        layout.addWidget(self.load_card)
        layout.addStretch(1)
        self.setWidget(content)
        self.comparison: tuple[MemoryComparison, ...] = ()

    def set_snapshot(self, snapshot: HardwareSnapshot) -> None:
        while self.machine_form.rowCount():
            self.machine_form.removeRow(0)
        for label, value in snapshot_rows(snapshot):
            self.machine_form.addRow(f"{label}:", _selectable(value))
        note = snapshot.offload_note
        self.machine_note.setText(note or "")
        self.machine_note.setVisible(bool(note))

    def set_load_report(
        self, plan: LoadPlan, reported: ReportedMemory | None = None, rss_delta: int | None = None
    ) -> None:
        """Show the plan's memory per device and, when known, what the load really took.

        ``reported``: llama.cpp's own buffer sizes (``parse_buffer_sizes`` of the load's log).
        ``rss_delta``: how much this process's resident memory grew across the load.
        """
        params = plan.params
        self.load_summary.setText(
            f"{plan.model.name or plan.model.path.name} ({plan.model.file_type}): "
            f"{params.n_seq_max} × {params.n_ctx_seq:,} tokens of context, "
            f"{params.n_gpu_layers} layers on GPU, {params.n_threads} threads"
        )
        self.memory_bar.set_devices(plan.memory)
        self.memory_bar.setVisible(bool(plan.memory))
        self.comparison = compare_memory(plan, reported)
        table = self.memory_table
        table.setRowCount(len(self.comparison))
        widest = 0
        for r, row in enumerate(self.comparison):
            diff_text, diff_short = difference_texts(row)
            texts = (
                row.label,
                format_bytes(row.predicted),
                "—" if row.reported is None else format_bytes(row.reported),
                diff_text,
            )
            for c, text in enumerate(texts):
                item = QTableWidgetItem(text)
                if c:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if row.label == "Total":
                    font = item.font()
                    font.setBold(True)
                    item.setFont(font)
                if c == 3:
                    item.setToolTip(diff_text)  # the full text, also where the column shortens it
                    item.setData(_SHORT_TEXT_ROLE, diff_short)
                    bold = table.font()
                    bold.setBold(True)
                    widest = max(widest, QFontMetrics(bold).horizontalAdvance(diff_text))
                table.setItem(r, c, item)
        table.short = False
        table.set_widest(widest)
        if reported is not None:
            buffers = {**reported.model, **{f"{k} KV": v for k, v in reported.kv.items()}}
            table.setToolTip(
                "llama.cpp buffers:\n" + "\n".join(f"  {k}: {format_bytes(v)}" for k, v in buffers.items())
            )
        table.setFixedHeight(table.horizontalHeader().sizeHint().height() + 26 * len(self.comparison) + 4)
        table.verticalHeader().setDefaultSectionSize(26)
        table.setVisible(True)
        if rss_delta is not None:
            self.rss_label.setText(
                f"Hearth's resident memory grew by {format_bytes(rss_delta)} during the load "
                "(memory-mapped weights count only once their pages are read)."
            )
        self.rss_label.setVisible(rss_delta is not None)


__all__ = ["HardwareView", "MemoryComparison", "compare_memory", "snapshot_rows"]
