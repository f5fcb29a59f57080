"""The terminal face of Hearth: ``hearth <command>``, the same objects the window shows, as text or JSON.
"""

from engine import lazy_exports

_EXPORTS = {
    "run_cli": "commands",
    "ProgressLine": "hub",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
