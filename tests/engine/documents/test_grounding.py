from pathlib import Path

from engine.chat.messages import ChatMessage, Role
from engine.documents.citations import INSTRUCTION
from engine.documents.grounding import CITE_REMINDER, QUESTION_HEADER, ground_messages, grounded_text
from engine.documents.retrieval import Excerpt, Retrieval, RetrievalMode


def _retrieval(*texts: str, whole: bool = False) -> Retrieval:
    excerpts = tuple(
        Excerpt(i, "c", Path(f"/docs/f{i}.pdf"), i, i, "", t, 1.0 / i, (i,), 0, len(t), len(t.split()))
        for i, t in enumerate(texts, 1)
    )
    return Retrieval("q", excerpts, whole, RetrievalMode.HYBRID, sum(len(t) for t in texts))


def test_the_last_user_message_gets_the_numbered_excerpts_before_the_question() -> None:
    messages = (
        ChatMessage(Role.SYSTEM, "Be brief."),
        ChatMessage(Role.USER, "first?"),
        ChatMessage(Role.ASSISTANT, "an answer", tokens=(1, 2, 3), tokens_model="m"),
        ChatMessage(Role.USER, "What is the deposit?"),
    )
    grounded = ground_messages(messages, _retrieval("Deposit is 900 EUR.", "Pets need consent."))
    assert grounded[:3] == messages[:3]  # earlier turns untouched: the cached prefix still matches
    text = grounded[3].text
    assert text.startswith(INSTRUCTION)
    assert "[1] f1.pdf, p. 1: Deposit is 900 EUR." in text and "[2] f2.pdf, p. 2: Pets need consent." in text
    assert text.endswith(f"{QUESTION_HEADER} What is the deposit?\n\n{CITE_REMINDER}")
    assert text.index("[2]") < text.index(QUESTION_HEADER)


def test_nothing_found_leaves_the_question_as_typed() -> None:
    messages = (ChatMessage(Role.USER, "hello"),)
    assert ground_messages(messages, _retrieval()) == messages
    assert grounded_text("hello", _retrieval()) == "hello"


def test_whole_documents_are_said_to_be_whole() -> None:
    assert "given whole" in grounded_text("q", _retrieval("all of it", whole=True))


def test_a_grounded_message_drops_token_ids_made_for_other_text() -> None:
    messages = (ChatMessage(Role.USER, "q", tokens=(5, 6), tokens_model="m"),)
    (grounded,) = ground_messages(messages, _retrieval("x"))
    assert grounded.tokens == () and grounded.tokens_model == ""
