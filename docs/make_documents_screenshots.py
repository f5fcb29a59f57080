"""Screenshots of the Documents page while a collection indexes, at 1280×800 and 1920×1080:
the test suite's retrieval corpus (21 real documents: text, Markdown, code, HTML, PDF, DOCX)
added as one folder, the default embedding model converted into a fresh data folder first.

Run under a real X server: ``xvfb-run -a -s "-screen 0 1920x1080x24" .venv/bin/python
docs/make_documents_screenshots.py`` -> docs/screenshots/{1280,1920}-documents-indexing.png.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from docs.make_screenshots import OUT, SIZES, event_pumps, shot, started_window  # noqa: E402


def main() -> None:
    from app.application import create_application
    from app.platform.paths import resolve_paths
    from app.widgets.nav_rail import Page
    from tests.engine.documents.corpus_fixture import build_corpus

    app = create_application()
    root = Path(tempfile.mkdtemp(prefix="hearth-docs-shots-"))
    paths = resolve_paths(root / "data", root / "models").ensure()
    corpus = build_corpus(root / "Household documents")
    OUT.mkdir(parents=True, exist_ok=True)
    pump, until = event_pumps(app)

    window = started_window(paths)
    window.show_page(Page.DOCUMENTS)
    page = window.documents_page
    page.create_collection("Household")
    until(lambda: page.panel.selected() == "Household")
    page.add_paths([corpus])
    bar = page.panel.progress.bar
    # Far enough in that the rate and the time left are known, the table half indexed.
    until(lambda: bar.maximum() > 0 and bar.value() >= bar.maximum() // 3)
    until(lambda: "left" in page.panel.progress.rate.text())
    for width, height in SIZES:
        window.resize(width, height)
        window.show_page(Page.DOCUMENTS)  # an empty library's start turned to the Models page
        pump(0.5)
        shot(window, f"{width}-documents-indexing")
    page.service.cancel()
    window.close()


if __name__ == "__main__":
    main()
