"""The load plan on the Models page says each number once: the shortfall in the verdict
(not again, with another figure, over the memory bar), and a tight plan "may swap" only
on a machine with swap; without it, how little it leaves free."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QPushButton

from app.widgets.memory_bar import MemoryBar
from app.widgets.model_panel import ModelPanel
from app.wording.presenters import fit_summary
from engine import LoadRequest, Verdict, format_bytes
from engine.machine.hardware import described_machine
from tests.engine.planner.test_planner import make_info
from tests.helpers import show_widget

GIB = 1 << 30
TOO_MANY = LoadRequest(parallel=64, context_per_conversation=4096)


def panel_text(panel: ModelPanel) -> str:
    bar = panel.memory_bar
    return "\n".join(
        [panel.verdict_label.text(), panel.reasons_label.text(), bar.toolTip()]
        + [MemoryBar.label(d) for d in bar.devices()]
    )


def fix_button(panel: ModelPanel, ending: str) -> QPushButton:
    return next(b for b in panel.suggestions_box.findChildren(QPushButton) if b.text().endswith(ending))


def test_one_shortfall_and_a_fix_that_leaves_little_says_how_little(qtbot) -> None:
    panel = show_widget(qtbot, ModelPanel(), 900, 800)
    panel.set_hardware(described_machine(ram_total=24 * GIB, ram_available=21 * GIB))
    panel.show_model(make_info())
    panel.apply_request(TOO_MANY)
    plan = panel.plan()
    assert plan is not None and plan.verdict is Verdict.DOES_NOT_FIT
    assert panel_text(panel).count("short by") == 1
    assert f"RAM short by {format_bytes(plan.deficit)}" in panel.verdict_label.text()

    qtbot.mouseClick(fix_button(panel, "parallel conversations"), Qt.MouseButton.LeftButton)
    tight = panel.plan()
    assert tight is not None and tight.verdict is Verdict.TIGHT
    left = format_bytes(tight.ram_left)
    assert panel.verdict_label.text().startswith(f"Fits, leaves only {left} free · ")  # "GiB", not "gib"
    assert "may swap" not in panel_text(panel)
    assert fit_summary(tight) == f"fits in RAM (CPU) — leaves only {left} free"
    # The free RAM as every line says it: 21.0 GiB, never the 19.8 GiB left after the reserve.
    assert "21.0 GiB free" in panel_text(panel)
    assert format_bytes(tight.memory[0].usable) not in panel_text(panel)


def test_with_swap_a_tight_plan_may_swap(qtbot) -> None:
    panel = show_widget(qtbot, ModelPanel(), 900, 800)
    panel.set_hardware(described_machine(ram_total=24 * GIB, ram_available=21 * GIB, swap_total=4 * GIB))
    panel.show_model(make_info())
    panel.apply_request(TOO_MANY)
    qtbot.mouseClick(fix_button(panel, "parallel conversations"), Qt.MouseButton.LeftButton)
    tight = panel.plan()
    assert tight is not None and tight.verdict is Verdict.TIGHT
    assert panel.verdict_label.text().startswith("Tight: may swap · ")
    assert fit_summary(tight) == "fits in RAM (CPU) — tight, may swap"
