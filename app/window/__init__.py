"""The main window and its pages (Chats, Models, Discover), and the parts it hands work to: the
chat's notice, the Models page's mediation, loading models, the local server's and the
dashboard's docks, the RPC workers, its actions, where it opens and what it remembers, what it
asks on quit.
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
    "ChatNotices": "notices",
    "DashboardDock": "dashboard_dock",
    "LoadDisplay": "load_display",
    "ModelLoading": "model_loading",
    "ModelsMediator": "models_mediator",
    "dropped_paths": "models_mediator",
    "ServerDock": "server_dock",
    "WindowState": "window_state",
    "WorkersView": "workers_view",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
