"""The terminal face of Hearth: ``hearth <command>``, the same objects the window shows, as text or JSON.

``commands`` builds the parser and runs; each command group has its module (``models``:
inspect, plan, hardware; ``chat``: chat, bench; ``serve``: serve, worker; ``hub``: search,
pull; ``docs``: docs add, list, remove, search, its bar in ``docs_progress``); ``options``
holds the options they share, ``output`` the printing.
"""

from engine import lazy_exports

_EXPORTS = {
    "build_parser": "commands",
    "run_cli": "commands",
    "ProgressLine": "hub",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
