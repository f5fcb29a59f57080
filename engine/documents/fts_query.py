"""A user's question as a safe FTS5 query: its words, each quoted, joined by OR.

FTS5 gives meaning to ``AND``, ``NOT``, ``NEAR``, ``*``, ``^``, ``:``, parentheses and quotes;
a question is text, never syntax. Words are taken as the ``unicode61`` tokenizer takes them
(letters and digits, any script; punctuation and underscores separate), each becomes a
quoted string (so ``NOT`` is the word "not"), and OR keeps one rare word enough to match:
BM25 ranks chunks with more and rarer words first.

FTS5 scores every chunk an OR query matches before it sorts them (some 6 µs a chunk on 2
cores), so a question holding one common word costs a pass over most of a large index
(850 ms at 100,000 chunks). ``bounded_query`` keeps the question's rarest words, as many as
match ``MAX_POSTINGS`` chunks together: the words it leaves out are those in so many chunks
that BM25 gives them almost no weight (its IDF falls to zero at half the chunks), and the
dense ranking, fused with this one, still sees the whole question.
"""

from __future__ import annotations

import re
from collections.abc import Callable

# Letters and digits of any script: what unicode61 keeps as token characters.
_WORD = re.compile(r"[^\W_]+")
# The most words a query keeps: a pasted paragraph as a question stays a fast query.
MAX_TERMS = 24
# The most chunks a question's words may match together (see above): 5,000 keeps BM25 under
# ~30 ms at any index size; a collection smaller than that always gets every word.
MAX_POSTINGS = 5000
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


def quoted(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def fts_query(question: str) -> str:
    """An FTS5 MATCH expression for ``question``; "" when it has no words at all."""
    return " OR ".join(quoted(term) for term in question_terms(question))


def bounded_query(question: str, postings: Callable[[str, int], int], cap: int = MAX_POSTINGS) -> str:
    """``fts_query`` of the question's rarest words that together match at most ``cap`` chunks,
    in the question's order; "" when even the rarest matches more. ``postings(match, n)`` counts
    the chunks ``match`` finds, up to ``n``."""
    counted = sorted(
        (postings(quoted(term), cap + 1), i, term) for i, term in enumerate(question_terms(question))
    )
    kept, total = [], 0
    for count, i, term in counted:
        if total + count > cap:
            break
        kept.append((i, term))
        total += count
    return " OR ".join(quoted(term) for _, term in sorted(kept))
