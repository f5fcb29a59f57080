"""The model library: the folders and files the user gave Hearth, indexed where they lie.
"""

from engine.base.lazy import lazy_exports

_EXPORTS = {
    "Library": "index",
    "LibraryEntry": "index",
    "name_stem": "index",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
