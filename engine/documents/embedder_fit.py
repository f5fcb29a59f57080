"""Whether an embedding model fits this machine, planned as any model is: its memory
(``embedding_file.embedder_memory``) on the CPU, beside the RAM the snapshot has free and the
planner's reserve, judged by the planner's one fit rule (``engine.planner.memory_verdict``)
and worded as the planner words a plan's memory.

``check_embedder_fits`` is what every caller runs before an embedder is opened (the window's
documents, ``hearth docs``, ``hearth serve --embedding-model``): ``EmbedderDoesNotFit`` when
it does not, and nothing is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.base.errors import DoesNotFit
from engine.base.units import format_bytes
from engine.documents.embedding_file import EmbeddingModelInfo, embedder_memory
from engine.machine.hardware import HardwareSnapshot
from engine.planner import DeviceMemory, Verdict, memory_line, memory_verdict, ram_reserve


class EmbedderDoesNotFit(DoesNotFit):
    """The embedding model needs more RAM than this machine has free (less the planner's reserve)."""

    def __init__(self, message: str, plan: EmbedderPlan | None = None) -> None:
        # The message first, as every EngineError: errors are rebuilt from it across processes.
        self.plan = plan
        super().__init__(message)


@dataclass(frozen=True)
class EmbedderPlan:
    """An embedder planned for a machine: its memory (on the CPU: Hearth runs it there) and
    the planner's verdict on it."""

    info: EmbeddingModelInfo
    memory: DeviceMemory
    verdict: Verdict
    limiting_resource: str | None
    deficit: int
    reasons: tuple[str, ...]

    @property
    def name(self) -> str:
        return self.info.model.display_name

    @property
    def fits(self) -> bool:
        return self.verdict is not Verdict.DOES_NOT_FIT

    @property
    def total_bytes(self) -> int:
        return self.memory.total

    @property
    def refusal(self) -> str:
        """One line, in the plan's words: "The embedding model all-MiniLM-L6-v2 does not fit
        (RAM short by 40 MB). Needs 131 MB of RAM: exceeds the 600 MB free (keeping 512 MB
        spare)." """
        return (
            f"The embedding model {self.name} does not fit ({self.limiting_resource} short by "
            f"{format_bytes(self.deficit)}). {memory_line(self.memory)}"
        )


def plan_embedder(info: EmbeddingModelInfo, hardware: HardwareSnapshot) -> EmbedderPlan:
    """The embedder's memory on ``hardware``'s RAM and the planner's verdict on it."""
    parts = embedder_memory(info)
    memory = DeviceMemory(
        device="CPU",
        weights=parts.weights,
        kv_cache=0,
        compute=parts.compute,
        output=parts.output,
        projector=0,
        draft=0,
        available=hardware.ram_available,
        reserve=ram_reserve(hardware),
        runtime=parts.runtime,
    )
    judged = memory_verdict((memory,), hardware)
    reasons = [memory_line(memory)]
    if judged.tight_reason is not None:
        reasons.append(judged.tight_reason)
    return EmbedderPlan(
        info=info,
        memory=memory,
        verdict=judged.verdict,
        limiting_resource=judged.limiting_resource,
        deficit=judged.deficit,
        reasons=tuple(reasons),
    )


def check_embedder_fits(info: EmbeddingModelInfo, hardware: HardwareSnapshot) -> EmbedderPlan:
    """The plan when the embedder fits; EmbedderDoesNotFit (one line) when it does not."""
    plan = plan_embedder(info, hardware)
    if not plan.fits:
        raise EmbedderDoesNotFit(plan.refusal, plan)
    return plan
