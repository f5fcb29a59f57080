"""The few words a verdict becomes in the Discover tab and `hearth pull`."""

from __future__ import annotations

from pathlib import Path

from app.wording.presenters import fit_summary
from engine.catalog import inspect_model
from engine.planner import LoadRequest, plan_load
from tests.engine.planner.test_planner import GIB, gpu, machine


def test_fit_summary_says_where_the_layers_go(hub_files: dict[str, Path]) -> None:
    info = inspect_model(hub_files["q4"])  # 4 blocks + the output layer
    request = LoadRequest(context_per_conversation=1024)
    assert fit_summary(plan_load(info, machine(), request)) == "fits in RAM (CPU)"
    assert fit_summary(plan_load(info, machine(gpus=(gpu(),)), request)) == "fits on the GPU"
    three = LoadRequest(context_per_conversation=1024, gpu_layers=3)
    partial = plan_load(info, machine(gpus=(gpu(),)), three)
    assert fit_summary(partial) == "fits with 3 of 5 layers on the GPU"
    tiny_ram = plan_load(info, machine(ram=GIB // 64), request)
    assert fit_summary(tiny_ram).startswith("does not fit (RAM short by ")
