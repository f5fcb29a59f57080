"""One request's drafting state: its n-gram index or prompt ids, the drafts in flight, its acceptance.

A plain value the request carries (``engine.runtime.active_request``) and the executor's
speculator updates (``engine.runtime.speculator``); it lives beside the policy it feeds so
that neither of those two modules needs the other to name it.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.speculation.policy import ACCEPTANCE_PRIOR, LookupIndex


@dataclass(eq=False)
class RequestSpeculation:
    """One request's drafting state."""

    lookup: LookupIndex | None = None  # prompt lookup: the request's n-gram index
    prompt_ids: tuple[int, ...] | None = None  # draft model: the prompt's ids (text only)
    in_flight: tuple[int, ...] = ()  # drafts decoded in the last batch, to verify
    accept_p: float = ACCEPTANCE_PRIOR  # estimated chance that the next draft is accepted
    draft_cap: int = 2  # slow start: how many drafts the next verification may have
    drafted: int = 0
    accepted: int = 0
