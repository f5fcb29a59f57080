"""A user's question as a safe FTS5 query: its words, each quoted, joined by OR.

FTS5 gives meaning to ``AND``, ``NOT``, ``NEAR``, ``*``, ``^``, ``:``, parentheses and quotes;
a question is text, never syntax. Words are taken as the ``unicode61`` tokenizer takes them
(letters and digits, any script; punctuation and underscores separate), each becomes a
quoted string (so ``NOT`` is the word "not"), and OR keeps one rare word enough to match:
BM25 ranks chunks with more and rarer words first.
"""

from __future__ import annotations

import re

# Letters and digits of any script: what unicode61 keeps as token characters.
_WORD = re.compile(r"[^\W_]+")
# The most words a query keeps: a pasted paragraph as a question stays a fast query.
MAX_TERMS = 24
# Words so common that matching them says nothing and costs a scan of most of the index.
# Dropped only while other words remain: "to be or not to be" still searches.
STOPWORDS = frozenset(
    {
        "a", "an", "and", "are", "as", "at", "be", "but", "by", "can", "could", "did", "do", "does",
        "for", "from", "had", "has", "have", "how", "i", "if", "in", "into", "is", "it", "its", "me",
        "my", "not", "of", "on", "or", "our", "so", "than", "that", "the", "their", "them", "then",
        "there", "these", "they", "this", "to", "was", "we", "were", "what", "when", "where", "which",
        "who", "whom", "why", "will", "with", "would", "you", "your",
    }
)  # fmt: skip


def question_terms(question: str) -> list[str]:
    """The question's distinct words, lower-cased, in order, without stopwords if any remain."""
    terms = list(dict.fromkeys(word.lower() for word in _WORD.findall(question)))
    kept = [t for t in terms if t not in STOPWORDS] or terms
    return kept[:MAX_TERMS]


def fts_query(question: str) -> str:
    """An FTS5 MATCH expression for ``question``; "" when it has no words at all."""
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in question_terms(question))
