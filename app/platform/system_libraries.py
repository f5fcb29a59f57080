"""The system libraries Qt's xcb platform (the X11 window) needs, and the Debian/Ubuntu
packages that provide them: one table for `make run`'s check and the .deb's Depends."""

from __future__ import annotations

import ctypes
import os

# soname -> Debian package; the sonames libQt6XcbQpa links to that a minimal Debian or
# Ubuntu may lack (PySide6 carries Qt itself, not these).
QT_XCB_LIBRARIES = {
    "libxcb.so.1": "libxcb1",
    "libxcb-cursor.so.0": "libxcb-cursor0",
    "libxcb-icccm.so.4": "libxcb-icccm4",
    "libxcb-image.so.0": "libxcb-image0",
    "libxcb-keysyms.so.1": "libxcb-keysyms1",
    "libxcb-randr.so.0": "libxcb-randr0",
    "libxcb-render-util.so.0": "libxcb-render-util0",
    "libxcb-shape.so.0": "libxcb-shape0",
    "libxcb-xfixes.so.0": "libxcb-xfixes0",
    "libxcb-xkb.so.1": "libxcb-xkb1",
    "libxkbcommon-x11.so.0": "libxkbcommon-x11-0",
    "libX11-xcb.so.1": "libx11-xcb1",
    "libEGL.so.1": "libegl1",
    "libfontconfig.so.1": "libfontconfig1",
    "libdbus-1.so.3": "libdbus-1-3",
}


def missing_packages() -> list[str]:
    """Packages to install before the window can open here ([] when nothing is missing)."""
    missing = []
    for soname, package in QT_XCB_LIBRARIES.items():
        try:
            ctypes.CDLL(soname)
        except OSError:
            missing.append(package)
    return sorted(set(missing))


def check_display_libraries() -> str | None:
    """One line saying what to install, or None when the window can open (or needs no X)."""
    if os.environ.get("QT_QPA_PLATFORM", "xcb") not in ("xcb", ""):
        return None
    missing = missing_packages()
    if not missing:
        return None
    return f"The window needs system libraries that are missing here: sudo apt install {' '.join(missing)}"
