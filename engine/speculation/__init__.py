"""Speculative decoding: the pure policy (drafts, acceptance, cost), one request's drafting
state and the draft model.
"""

from engine.base.lazy import lazy_exports

_EXPORTS = {
    "DraftModel": "draft_model",
    "DraftRequest": "draft_model",
    "IncompatibleDraft": "draft_model",
    "check_draft_compatible": "draft_model",
    "ACCEPTANCE_PRIOR": "policy",
    "AcceptedRun": "policy",
    "DraftCostModel": "policy",
    "InvalidSpeculation": "policy",
    "LookupIndex": "policy",
    "MAX_DRAFT_LIMIT": "policy",
    "PromptLookup": "policy",
    "SpeculationConfig": "policy",
    "SpeculationMode": "policy",
    "accept_run": "policy",
    "draft_limit": "policy",
    "next_draft_cap": "policy",
    "relax_acceptance": "policy",
    "update_acceptance": "policy",
    "verify_rows": "policy",
    "RequestSpeculation": "request_state",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
