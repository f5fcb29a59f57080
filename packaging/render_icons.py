"""Render resources/hearth.svg into the PNG sizes desktops look up (resources/icons/).

The PNGs are committed: building a package must not depend on an SVG renderer being
available, and icon themes (hicolor) want fixed-size bitmaps next to the scalable SVG.
Run again after editing the SVG:

    QT_QPA_PLATFORM=offscreen .venv/bin/python packaging/render_icons.py
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SVG = REPO / "resources" / "hearth.svg"
ICON_DIR = REPO / "resources" / "icons"
# The hicolor sizes desktops (GNOME, KDE, XFCE) and Windows/macOS icon sets actually request.
SIZES = (16, 22, 24, 32, 48, 64, 128, 256, 512)


def icon_file(size: int) -> Path:
    return ICON_DIR / f"hearth-{size}.png"


def render_icons() -> list[Path]:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QGuiApplication, QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    _app = QGuiApplication.instance() or QGuiApplication(sys.argv[:1])  # QPainter on images needs one
    renderer = QSvgRenderer(str(SVG))
    if not renderer.isValid():
        raise SystemExit(f"cannot read {SVG}")
    ICON_DIR.mkdir(parents=True, exist_ok=True)
    written = []
    for size in SIZES:
        image = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
        image.fill(Qt.GlobalColor.transparent)
        painter = QPainter(image)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
        renderer.render(painter)
        painter.end()
        target = icon_file(size)
        if not image.save(str(target), "PNG"):
            raise SystemExit(f"cannot write {target}")
        written.append(target)
    return written


if __name__ == "__main__":
    for path in render_icons():
        print(path.relative_to(REPO))
