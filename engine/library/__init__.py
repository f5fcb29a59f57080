"""The model library: the folders and files the user gave Hearth, indexed where they lie.

``index`` holds the ``Library`` and its state file, ``scan`` finds the files on disk (split
parts grouped), ``pairing`` matches projectors and draft models with text models.
"""

from engine.base.lazy import lazy_exports

_EXPORTS = {
    "Library": "index",
    "LibraryEntry": "index",
    "DRAFT_SHARE": "pairing",
    "best_draft": "pairing",
    "draft_candidates": "pairing",
    "name_stem": "pairing",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
