"""Hearth on this computer: data folders, bundled resources, system libraries, one instance per
folder, the packaged self-test, GUI-thread garbage collection and the demo models' install.
"""

from engine import lazy_exports

_EXPORTS = {
    "ensure_default_model": "default_model",
    "GuiThreadCollector": "gui_garbage",
    "AppPaths": "paths",
    "read_settings_file": "paths",
    "resolve_paths": "paths",
    "save_models_dir": "paths",
    "write_settings_key": "paths",
    "ensure_chat_model": "qwen_model",
    "ensure_draft_model": "qwen_model",
    "print_progress": "qwen_model",
    "resource_path": "resources",
    "seconds_since_process_start": "self_test",
    "InstanceServer": "single_instance",
    "ask_running_to_raise": "single_instance",
    "instance_name": "single_instance",
    "check_display_libraries": "system_libraries",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
