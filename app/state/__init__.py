"""The app's state values: what a service or controller is in, as frozen values and enums that
widgets may import (they never import a service or a controller). No Qt objects here.
"""

from engine import lazy_exports

_EXPORTS = {
    "ModelChoice": "choices",
    "ListingState": "remote",
    "RemoteServer": "remote",
    "ServerListing": "remote",
    "SessionState": "session",
    "ServerStatus": "serving",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
