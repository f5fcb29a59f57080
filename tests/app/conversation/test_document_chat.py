"""Chatting with documents in the window: each chat's collections (the header's Documents
menu) saved and restored; a reply asked with the numbered excerpts of a real index, its
sources saved with it (a restart keeps them); nothing found, documents given whole, and a
search that fails each said under the reply, the question then sent as typed."""

from __future__ import annotations

from pathlib import Path

from app.chat import MessageState
from app.conversation.document_chat import search_row_id
from app.conversation.document_context import FAILED_NOTE, NONE_FOUND_NOTE, SEARCHING, WHOLE_NOTE
from app.store.history import Grounding, Store
from engine import Role
from engine.documents.grounding import CITE_REMINDER
from tests.app.documents_support import IndexSource, build_source, embedder, embedder_gguf, minilm_folder  # noqa: F401
from tests.helpers import WAIT, last, load, open_window
from tests.helpers import send as type_and_send

CTX = 4096
QUESTION = "How often should the espresso machine be descaled?"


def answered(window) -> bool:
    return window.chat.streaming == 0 and not list(window.chat.documents.searching())


def send(qtbot, window, text: str, wait: bool = True) -> None:
    """Type and send ``text``; with ``wait``, until its documents were searched and the reply is done."""
    type_and_send(qtbot, window, text, wait=False)
    if wait:
        qtbot.waitUntil(lambda: answered(window), timeout=WAIT)


def requests_of(window) -> list:
    """Every request the loaded model is given from now on."""
    model = window.session.ready_model
    seen: list = []
    submit = model.submit

    def recording(request, connect=None):
        seen.append(request)
        return submit(request, connect)

    model.submit = recording
    return seen


def ready(qtbot, window, model: Path, source: IndexSource) -> None:
    window.chat.documents.set_source(source)
    load(qtbot, window, model, ctx=CTX, parallel=2)


def choose(window, *names: str) -> None:
    button = window.chats_page.header.documents
    for name in names:
        button.set_checked_name(name, True)


def test_each_chat_keeps_its_collections_across_a_restart(
    qtbot,
    app_paths,
    hardware,
    tmp_path: Path,
    embedder,  # noqa: F811
) -> None:
    source = build_source(tmp_path / "docs", embedder)
    window = open_window(qtbot, app_paths, hardware)
    window.chat.documents.set_source(source)
    button = window.chats_page.header.documents
    assert [a.text() for a in button.menu_.actions()] == ["empty", "manual", "notes"]
    assert button.chosen() == [] and button.text() == "Documents ▾"

    choose(window, "notes")  # before any chat: the first one made takes it
    first = window.chat.new_conversation()
    assert window.store.conversation_collections(first) == ["notes"]
    choose(window, "manual")
    assert window.store.conversation_collections(first) == ["manual", "notes"]
    assert button.text() == "Documents · 2 ▾"
    second = window.chat.new_conversation()
    assert button.chosen() == [], "a new chat searches nothing until told"
    window.chat.select(first)
    assert button.chosen() == ["manual", "notes"]
    button.set_checked_name("manual", False)
    db = window.store.path
    window.close()

    with Store(db) as store:
        assert store.conversation_collections(first) == ["notes"]
        assert store.conversation_collections(second) == []
    again = open_window(qtbot, app_paths, hardware)
    again.chat.documents.set_source(source)
    again.chat.select(first)
    assert again.chats_page.header.documents.chosen() == ["notes"]
    again.chat.select(second)
    assert again.chats_page.header.documents.chosen() == []
    again.close()


def test_a_reply_is_asked_with_numbered_excerpts_and_keeps_its_sources(
    qtbot,
    window,
    scripted_model: Path,
    tmp_path: Path,
    embedder,  # noqa: F811
) -> None:
    source = build_source(tmp_path / "docs", embedder)
    ready(qtbot, window, scripted_model, source)
    window.new_chat()
    conversation = window.chat.current_id
    choose(window, "notes")
    seen = requests_of(window)
    send(qtbot, window, QUESTION, wait=False)
    # Searching first: the reply's row says so, and the chat cannot be sent to meanwhile.
    row = search_row_id(conversation)
    assert window.message_view.status_text(row) == SEARCHING
    assert window.conversation_list.busy_text(conversation) == "searching documents"
    qtbot.waitUntil(
        lambda: window.chat.streaming == 0 and conversation not in window.chat.documents, timeout=WAIT
    )
    assert window.message_view.message(row) is None

    assert source.asked == [(["notes"], QUESTION, CTX)]
    (request,) = seen
    asked = request.messages[-1]
    assert asked.role is Role.USER
    assert "cite it by its number in square brackets" in asked.text
    assert asked.text.endswith(f"Question: {QUESTION}\n\n{CITE_REMINDER}")
    assert "[1] espresso_machine_manual.md" in asked.text, "the best excerpt is about descaling"
    assert "descal" in asked.text.lower()

    reply = last(window, Role.ASSISTANT)
    assert reply.state is MessageState.DONE
    given = reply.sources
    assert len(given) >= 2 and [s.n for s in given] == list(range(1, len(given) + 1))
    assert reply.documents_note == ""
    for s in given:
        assert f"[{s.n}] {s.name}" in asked.text and s.text in asked.text
    # The store has them: a restart (the database opened again) shows the same.
    with Store(window.store.path) as store:
        stored = store.messages(conversation)[-1]
        assert stored.grounding is Grounding.EXCERPTS
        assert [(s.n, s.path.name, s.page, s.text) for s in stored.sources] == [
            (s.n, Path(s.path).name, s.page, s.text) for s in given
        ]
        assert all(s.end > s.start for s in stored.sources)
    window.chat.select(window.chat.new_conversation())
    window.chat.select(conversation)
    assert last(window, Role.ASSISTANT).sources == given

    # A follow-up searches again; the first question stays as the user typed it.
    send(qtbot, window, "And the bicycle chain?")
    assert len(seen) == 2
    assert seen[1].messages[-1].text.endswith(f"Question: And the bicycle chain?\n\n{CITE_REMINDER}")
    assert next(m.text for m in seen[1].messages if m.role is Role.USER) == QUESTION


def test_nothing_found_whole_documents_and_a_failed_search_are_said_under_the_reply(
    qtbot,
    window,
    scripted_model: Path,
    tmp_path: Path,
    embedder,  # noqa: F811
) -> None:
    source = build_source(tmp_path / "docs", embedder)
    ready(qtbot, window, scripted_model, source)
    seen = requests_of(window)

    window.new_chat()
    choose(window, "empty")
    send(qtbot, window, QUESTION)
    reply = last(window, Role.ASSISTANT)
    assert seen[-1].messages[-1].text == QUESTION, "sent as typed"
    assert reply.sources == () and reply.documents_note == NONE_FOUND_NOTE
    assert window.store.messages(window.chat.current_id)[-1].grounding is Grounding.NONE_FOUND

    window.new_chat()
    choose(window, "manual")
    send(qtbot, window, "Where does the index live?")
    reply = last(window, Role.ASSISTANT)
    assert reply.documents_note == WHOLE_NOTE
    assert [s.page for s in reply.sources] == [1, 2, 3], "each page of the PDF, whole, numbered"
    assert "WAL mode" in seen[-1].messages[-1].text

    # A collection removed after the menu listed it: the search fails in one line.
    window.new_chat()
    choose(window, "notes")
    source.index.remove_collection("notes")
    send(qtbot, window, QUESTION)
    reply = last(window, Role.ASSISTANT)
    assert seen[-1].messages[-1].text == QUESTION
    assert reply.documents_note.startswith(FAILED_NOTE.split("{")[0])
    assert "notes" in reply.documents_note and reply.state is MessageState.DONE


def test_regenerate_searches_again_and_continue_keeps_the_excerpts(
    qtbot,
    window,
    scripted_model: Path,
    tmp_path: Path,
    embedder,  # noqa: F811
) -> None:
    source = build_source(tmp_path / "docs", embedder)
    ready(qtbot, window, scripted_model, source)
    window.new_chat()
    choose(window, "notes")
    seen = requests_of(window)
    send(qtbot, window, QUESTION)
    first = last(window, Role.ASSISTANT)
    window.chat.regenerate(first.id)
    qtbot.waitUntil(
        lambda: window.chat.streaming == 0 and not list(window.chat.documents.searching()), timeout=WAIT
    )
    assert len(source.asked) == 2 and source.asked[1][1] == QUESTION
    again = last(window, Role.ASSISTANT)
    assert again.id != first.id and again.sources == first.sources
    assert seen[1].messages[-1].text == seen[0].messages[-1].text

    window.chat.continue_reply(again.id)
    qtbot.waitUntil(lambda: window.chat.streaming == 0, timeout=WAIT)
    assert len(source.asked) == 2, "Continue does not search again"
    assert seen[-1].messages[-1].text == seen[0].messages[-1].text, "the same excerpts, the same prompt"
