"""The app's long-lived services, each a Qt object the window wires up: the model session, the
library, Discover, the local API server, remote servers and RPC workers; and ``planning``,
the hardware every plan is made for. No widgets here; their state values are in ``app.state``.
"""

from engine import lazy_exports

_EXPORTS = {
    "Services": "bundle",
    "DiscoverController": "discover",
    "QuantPlan": "discover",
    "SummaryRow": "discover",
    "LibraryController": "library",
    "LibraryCounts": "library",
    "LocalServer": "local_server",
    "ModelSession": "model_session",
    "planning_hardware": "planning",
    "RemoteServers": "remote_servers",
    "SERVERS_KEY": "remote_servers",
    "WorkerRegistry": "workers",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
