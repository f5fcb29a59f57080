"""A plan's words agree with its numbers: one shortfall, one free-RAM figure, and "may
swap" only on a machine that has swap (without it, how little the plan leaves free)."""

from __future__ import annotations

import re

import psutil

from engine.base.units import format_bytes
from engine.machine.hardware import described_machine, take_snapshot
from engine.planner import LoadPlan, LoadRequest, Verdict, describe_plan, plan_load
from tests.engine.planner.test_planner import make_info

GIB = 1 << 30
NO_SWAP = described_machine(ram_total=24 * GIB, ram_available=21 * GIB)
WITH_SWAP = described_machine(ram_total=24 * GIB, ram_available=21 * GIB, swap_total=8 * GIB)
TOO_MANY = LoadRequest(parallel=64, context_per_conversation=4096)  # an 8B model's KV for 64: no


def fixed(hardware) -> tuple[LoadPlan, LoadPlan]:
    """The plan that does not fit, and the one its "N parallel conversations" fix gives."""
    info = make_info()
    plan = plan_load(info, hardware, TOO_MANY)
    fix = next(s for s in plan.suggestions if s.description.endswith("parallel conversations"))
    return plan, plan_load(info, hardware, fix.request)


def text(plan: LoadPlan) -> str:
    return "\n".join([plan.headline, *describe_plan(plan)])


def test_a_fix_that_leaves_little_ram_says_how_little_where_nothing_can_swap() -> None:
    _, tight = fixed(NO_SWAP)
    assert tight.verdict is Verdict.TIGHT and tight.fits and not tight.may_swap
    left = format_bytes(tight.ram_left)
    assert tight.headline == f"fits, leaves only {left} free"
    assert "swap" not in text(tight).replace("has no swap", "")
    said = f"Once loaded it leaves only {left} of the 21.0 GiB of RAM free"
    assert any(r.startswith(said) for r in tight.reasons)


def test_with_swap_a_tight_plan_may_swap() -> None:
    _, tight = fixed(WITH_SWAP)
    assert tight.verdict is Verdict.TIGHT and tight.may_swap
    assert tight.headline == "tight: may swap"
    assert any(r.startswith("Tight: once loaded it leaves only") and r.endswith("may swap.")
               for r in tight.reasons)


def test_one_free_ram_figure_per_plan() -> None:
    _, tight = fixed(NO_SWAP)
    ram = tight.memory[0]
    assert format_bytes(ram.usable) != format_bytes(ram.available)  # the reserve: two figures to mix up
    said = re.sub(r"leaves only \S+ \S+", "", text(tight))  # what is left once loaded is no "free" figure
    free = set(re.findall(r"(\d[\d.,]* [KMGT]?i?B)(?: of RAM)? free", said))
    assert free == {format_bytes(ram.available)}
    assert format_bytes(ram.usable) not in text(tight)


def test_one_shortfall_per_plan() -> None:
    plan, _ = fixed(NO_SWAP)
    assert plan.verdict is Verdict.DOES_NOT_FIT
    said = text(plan)
    assert said.count("short by") == 1
    assert f"RAM short by {format_bytes(plan.deficit)}" in said


def test_suggestions_say_what_they_give() -> None:
    plan, tight = fixed(NO_SWAP)
    assert "To make it fit:" in describe_plan(plan)
    assert "For more room:" in describe_plan(tight)
    assert not any("GPU" in line for line in describe_plan(tight) if line.endswith(":"))


def test_the_snapshot_knows_this_machine_s_swap() -> None:
    assert take_snapshot().swap_total == psutil.swap_memory().total
    assert NO_SWAP.swap_total == 0 and WITH_SWAP.swap_total == 8 * GIB
