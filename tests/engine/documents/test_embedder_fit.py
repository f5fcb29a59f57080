"""The embedding model planned like any model: its memory judged by the planner's one fit rule
(``memory_verdict``) against a machine's free RAM, refused in one line before anything opens."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from engine import (
    EmbedderDoesNotFit,
    MemoryVerdict,
    Verdict,
    estimate_embedder_memory,
    memory_verdict,
    open_embedder,
    plan_embedder,
    read_embedding_model,
)
from engine.base.errors import DoesNotFit, EngineError
from engine.machine.hardware import described_machine
from tests.engine.documents.conftest import embedder_gguf, minilm_folder  # noqa: F401 (fixtures)

MIB = 1 << 20
# 4 GiB of RAM: the planner keeps 512 MiB spare (its minimum reserve).
ROOMY = described_machine(ram_total=4 << 30, ram_available=3 << 30)
CRAMPED = described_machine(ram_total=4 << 30, ram_available=600 * MIB)


def test_the_default_embedder_fits_a_machine_with_room(embedder_gguf: Path) -> None:  # noqa: F811
    info = read_embedding_model(embedder_gguf)
    plan = plan_embedder(info, ROOMY)
    assert plan.verdict is Verdict.FITS and plan.fits
    assert plan.name == "all-MiniLM-L6-v2"
    assert plan.total_bytes == estimate_embedder_memory(info)  # the engine's estimate, all on the CPU
    assert plan.memory.device == "CPU" and plan.memory.available == 3 << 30
    assert plan.memory.reserve == 512 * MIB
    assert plan.reasons[0].startswith("Needs 123.1 MiB of RAM: fits in the 3.0 GiB free")


def test_it_does_not_fit_little_free_ram_and_says_how_much_it_needs(embedder_gguf: Path) -> None:  # noqa: F811
    info = read_embedding_model(embedder_gguf)
    plan = plan_embedder(info, CRAMPED)
    need = estimate_embedder_memory(info)
    assert plan.verdict is Verdict.DOES_NOT_FIT and not plan.fits
    assert plan.limiting_resource == "RAM"
    assert plan.deficit == need - (600 - 512) * MIB
    assert plan.refusal == (
        "The embedding model all-MiniLM-L6-v2 does not fit (RAM short by 35.1 MiB). "
        "Needs 123.1 MiB of RAM: exceeds the 600.0 MiB free (keeping 512.0 MiB spare)."
    )
    assert "\n" not in plan.refusal


def test_the_verdict_is_the_planners_rule_tight_included(embedder_gguf: Path) -> None:  # noqa: F811
    info = read_embedding_model(embedder_gguf)
    need = estimate_embedder_memory(info)
    # Within the planner's TIGHT_MARGIN of the usable RAM: tight, and said as a chat model's plan says it.
    tight = described_machine(ram_total=4 << 30, ram_available=512 * MIB + need + need // 20)
    plan = plan_embedder(info, tight)
    assert plan.verdict is Verdict.TIGHT and plan.fits
    judged = memory_verdict((plan.memory,), tight)
    assert judged == MemoryVerdict(Verdict.TIGHT, None, 0, plan.reasons[1])
    assert plan.reasons[1].startswith("Once loaded it leaves only")


def test_open_embedder_refuses_before_anything_loads(embedder_gguf: Path) -> None:  # noqa: F811
    before = {t.name for t in threading.enumerate()}
    with pytest.raises(EmbedderDoesNotFit) as refused:
        open_embedder(embedder_gguf, n_threads=1, hardware=CRAMPED)
    assert isinstance(refused.value, DoesNotFit) and isinstance(refused.value, EngineError)
    assert refused.value.message.startswith("The embedding model all-MiniLM-L6-v2 does not fit")
    assert refused.value.plan.verdict is Verdict.DOES_NOT_FIT
    started = {t.name for t in threading.enumerate()} - before
    assert not any(name.startswith("hearth-embedder") for name in started)  # no llama.cpp thread


def test_open_embedder_opens_what_fits(embedder_gguf: Path) -> None:  # noqa: F811
    with open_embedder(embedder_gguf, n_threads=1, hardware=ROOMY) as embedder:
        assert embedder.embed(["a fitting embedder"]).shape == (1, 384)
