"""A conversation grounded in retrieved excerpts: the numbered block put before the question.

The block goes into the last user message, not the system prompt: every earlier turn stays
token for token what the KV cache holds, so a follow-up question reuses the conversation's
prefix and only the new excerpts and question are prefilled. Earlier turns keep the text the
user typed; their excerpts are not repeated (the replies' citations stay readable because the
Sources are saved with each reply, not because the excerpts are re-sent).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from engine.chat.messages import ChatMessage, Role
from engine.documents.citations import prompt_block
from engine.documents.retrieval import Retrieval

QUESTION_HEADER = "Question:"
# Said again after the question: a small model follows what it read last. With the instruction
# only above the excerpts Qwen2.5-Coder 1.5B answered right and cited nothing; with this it cites
# (not always the right number: the Sources list lets the user check).
CITE_REMINDER = (
    "Answer in full sentences. End each sentence that uses an excerpt with its number in brackets, "
    "like this: [1]."
)


def grounded_text(question: str, retrieval: Retrieval) -> str:
    """The user's question with the excerpts before it; the question alone when none were found."""
    block = prompt_block(retrieval)
    return f"{block}\n\n{QUESTION_HEADER} {question}\n\n{CITE_REMINDER}" if block else question


def ground_messages(messages: Sequence[ChatMessage], retrieval: Retrieval) -> tuple[ChatMessage, ...]:
    """``messages`` with the last user message grounded in ``retrieval`` (unchanged without one)."""
    out = list(messages)
    for i in range(len(out) - 1, -1, -1):
        if out[i].role is Role.USER:
            out[i] = replace(out[i], text=grounded_text(out[i].text, retrieval), tokens=(), tokens_model="")
            break
    return tuple(out)
