"""The documents side of the chat: which collections each conversation searches (the header's
Documents button, saved in the store), and the search made before a reply is submitted, its
"Searching documents…" row shown meanwhile.

A search holds no row in the store: the reply row is made when the excerpts are back, so a
crash mid-search leaves the user's message, unanswered, as after any unanswered send.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from PySide6.QtCore import QObject

from app.chat import ConversationList, DocumentsButton, MessageData, MessageState, MessageView
from app.conversation.document_context import SEARCHING, DocumentSource, Grounded, stored_retrieval
from app.conversation.reply_runner import ReplyRunner, StartReply
from app.conversation.shown import ShownConversation
from app.services.model_session import ModelSession
from app.store.history import Message, Store
from engine import Retrieval, Role

SEARCH_STAGE = "searching documents"  # what the conversation list says meanwhile


def search_row_id(conversation_id: int) -> tuple[str, int]:
    """The id of the row that says a conversation's documents are being searched."""
    return ("documents-search", conversation_id)


class DocumentChat(QObject):
    """Collections per conversation and the searches in flight, by conversation id;
    ``shown``: the controller (which conversation is shown), also the parent."""

    def __init__(
        self,
        store: Store,
        session: ModelSession,
        replies: ReplyRunner,
        view: MessageView,
        conversations: ConversationList,
        shown: ShownConversation,
        button: DocumentsButton | None = None,
    ) -> None:
        super().__init__(shown if isinstance(shown, QObject) else None)
        self.store = store
        self.session = session
        self.replies = replies
        self.view = view
        self.conversations = conversations
        self._shown = shown
        self.source: DocumentSource | None = None
        self.button: DocumentsButton | None = None
        self._names: list[str] = []
        self._unsaved: list[str] = []  # chosen while no conversation is shown: the next one's
        self._searches: dict[int, int] = {}  # conversation id -> the search's number
        self._next = 0
        if button is not None:
            self.attach(button)

    def _current(self) -> int | None:
        return self._shown.current_id

    # -- answering ---------------------------------------------------------------------------

    def answer(self, conversation_id: int, question: str, start: StartReply) -> None:
        """Write a reply (its row made by ``start``) to ``question``: with the conversation's
        collections turned on, once their excerpts for it are back (a "Searching
        documents…" row meanwhile), asked with them numbered before the question."""
        names = self.wanted(conversation_id)
        model = self.session.chat_model
        if not names or model is None:
            self.replies.generate(conversation_id, start)
            return
        self.search(
            conversation_id, names, question, model.context_per_conversation,
            lambda grounded: self.replies.generate(conversation_id, start, grounded=grounded),
        )  # fmt: skip

    def go_on(self, reply: Message) -> None:
        """Continue a reply, asked again with the excerpts it was given: the same prompt, so
        its cached prefix is reused."""
        grounded = stored_retrieval(reply, self.question_of(reply))
        resume: StartReply = lambda *_: self.store.resume_reply(reply.id)  # noqa: E731
        self.replies.generate(reply.conversation_id, resume, resume=True, grounded=grounded)

    def question_of(self, reply: Message) -> str:
        """The user's message a reply answers."""
        return self.store.get_message(reply.parent_id).text if reply.parent_id is not None else ""

    # -- the collections ---------------------------------------------------------------------

    def set_source(self, source: DocumentSource | None) -> None:
        """Where excerpts come from (the documents service); None: no documents."""
        self.source = source
        if source is None:
            self._names = []
        self.refresh()

    def attach(self, button: DocumentsButton) -> None:
        self.button = button
        button.chosen_changed.connect(self._chosen)
        self.refresh()

    def refresh(self) -> None:
        """The collections changed (added, removed, renamed): the menu lists them again."""
        if self.source is None:  # shut down, or no documents: a late listing changes nothing
            return
        self._names = self.source.collection_names()
        self.show_choice(self._current())

    def show_choice(self, conversation_id: int | None) -> None:
        """The button shows what ``conversation_id`` searches (the unsaved choice for none)."""
        if self.button is None:
            return
        store = self.store
        chosen = self._unsaved if conversation_id is None else store.conversation_collections(conversation_id)
        self.button.blockSignals(True)
        self.button.set_collections(self._names, chosen)
        self.button.blockSignals(False)

    def adopt(self, conversation_id: int) -> None:
        """A conversation made while none was shown takes what was chosen meanwhile."""
        if self._unsaved:
            self.store.set_conversation_collections(conversation_id, self._unsaved)
            self._unsaved = []

    def _chosen(self, names: list[str]) -> None:
        conversation_id = self._current()
        if conversation_id is None:
            self._unsaved = list(names)
            return
        # Names the menu does not list (a collection gone for now) stay chosen.
        kept = [n for n in self.store.conversation_collections(conversation_id) if n not in self._names]
        self.store.set_conversation_collections(conversation_id, [*kept, *names])

    def wanted(self, conversation_id: int) -> list[str]:
        """The collections a reply in this conversation searches: chosen, and there."""
        if self.source is None:
            return []
        names = set(self._names)
        return [n for n in self.store.conversation_collections(conversation_id) if n in names]

    # -- searching --------------------------------------------------------------------------

    def __contains__(self, conversation_id: object) -> bool:
        """Whether the conversation's documents are being searched."""
        return conversation_id in self._searches

    def searching(self) -> Iterator[int]:
        return iter(list(self._searches))

    def mark_busy(self) -> None:
        """The conversation list (filled again) says which chats are searching."""
        for conversation_id in self._searches:
            self.conversations.set_busy(conversation_id, True, SEARCH_STAGE)

    def shown(self, conversation_id: int) -> None:
        """The conversation is shown: its search row, if searching; its collections ticked."""
        self.show_search(conversation_id)
        self.show_choice(conversation_id)

    def search(
        self,
        conversation_id: int,
        names: list[str],
        question: str,
        context_tokens: int,
        then: Callable[[Grounded], None],
    ) -> None:
        """Search ``names`` for ``question``, then call ``then`` with what was found (not when
        the search was cancelled meanwhile: the conversation deleted, the window closing)."""
        assert self.source is not None
        self._next += 1
        number = self._next
        self._searches[conversation_id] = number
        self.show_search(conversation_id)
        self.conversations.set_busy(conversation_id, True, SEARCH_STAGE)

        def done(retrieval: Retrieval | None, error: str | None) -> None:
            if self._searches.get(conversation_id) != number:
                return
            self._end(conversation_id)
            then(Grounded(retrieval, "" if retrieval is not None else (error or "no answer")))

        self.source.retrieve_async(names, question, context_tokens, done)

    def show_search(self, conversation_id: int) -> None:
        """The "Searching documents…" row, where the reply will be (the conversation shown)."""
        if conversation_id in self._searches and conversation_id == self._current():
            self.view.append_message(
                MessageData(search_row_id(conversation_id), Role.ASSISTANT, "", MessageState.PENDING,
                            activity=SEARCHING)
            )  # fmt: skip
            self.view.scroll_to_bottom()

    def cancel(self, conversation_id: int) -> None:
        if conversation_id in self._searches:
            self._end(conversation_id)

    def shutdown(self) -> None:
        """The store closes next: nothing the service says after this reaches it."""
        self._searches.clear()
        self.set_source(None)

    def _end(self, conversation_id: int) -> None:
        self._searches.pop(conversation_id, None)
        self.view.remove_message(search_row_id(conversation_id))
        self.conversations.set_busy(conversation_id, False)
