"""The main window and its pages (Chats, Models, Discover), where it opens and what it asks on quit.
"""

from engine import lazy_exports

_EXPORTS = {
    "CHAT_MIN_WIDTH": "chats_page",
    "LIST_MIN_WIDTH": "chats_page",
    "DiscoverPage": "discover_page",
    "HubSettingsDialog": "discover_page",
    "RESULT_PAGE_ROWS": "discover_page",
    "RepoListModel": "discover_page",
    "PREFERRED_SIZE": "geometry",
    "clamp_geometry": "geometry",
    "first_geometry": "geometry",
    "MainWindow": "main_window",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
