"""The user's settings, each with one typed accessor: preferences, the Hub's endpoint and token,
remote servers' API keys, each model's last load settings and the file dialogs' folder.
"""

from engine import lazy_exports

_EXPORTS = {
    "HubSettings": "hub_settings",
    "KeyringUnavailable": "hub_settings",
    "MAX_PARALLEL_DOWNLOADS": "hub_settings",
    "header_cache_dir": "hub_settings",
    "hub_access": "hub_settings",
    "load_settings": "hub_settings",
    "read_token": "hub_settings",
    "save_settings": "hub_settings",
    "store_token": "hub_settings",
    "with_endpoint": "hub_settings",
    "KeyVault": "key_vault",
    "NO_KEYRING": "key_vault",
    "SERVICE": "key_vault",
    "MAX_CONTEXT": "load_settings",
    "first_request": "load_settings",
    "request_from_dict": "load_settings",
    "request_to_dict": "load_settings",
    "settings_key": "load_settings",
    "Preferences": "preferences",
    "Theme": "preferences",
    "RecentFolder": "recent_folder",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
