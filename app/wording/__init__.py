"""Human wording for engine values, shared by the terminal and the window (no Qt).
"""

from engine import lazy_exports

_EXPORTS = {
    "BASE_MODEL_BADGE": "presenters",
    "BASE_MODEL_TIP": "presenters",
    "FACT_TIPS": "presenters",
    "PARAMETERS_TIP": "presenters",
    "PHASE_LABELS": "presenters",
    "elide_middle": "presenters",
    "fit_summary": "presenters",
    "model_facts": "presenters",
    "parameters_text": "presenters",
    "sentence": "presenters",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
