"""The text of a query that is embedded for dense retrieval.

A question embeds close to other questions: "What activities has Jo done with her
family?" lies nearer "What other classes have you done?" than "we went camping with the
kids", while the answer to a question is a statement. With DECLARATIVE set, the query's
question words (the interrogatives and the auxiliaries of a question, QUESTION_WORDS) and
its question marks are left out of the embedded text, so the vector is the question's
content. Off unless chosen leave-one-conversation-out (README, issue 19).

Invariants: pure; the speakers' names are left out first (planner.candidates.without_names);
a query that would be left with no word keeps its words; bm25, the classifier's rules and
the excerpt focus still see the whole query (only the embedded text changes).
"""

from __future__ import annotations

import re

from tiermem.planner.candidates import without_names

DECLARATIVE = False
# English interrogatives and the auxiliaries that open or carry a question; function words,
# not any data set's vocabulary
QUESTION_WORDS = frozenset([
    "what", "which", "who", "whom", "whose", "where", "when", "why", "how",
    "do", "does", "did", "is", "are", "was", "were", "has", "have", "had",
    "can", "could", "would", "will", "should", "might", "may",
])
_WORD_OR_MARK = re.compile(r"[\w']+|\?|[^\w\s?]+")


def declarative(text: str) -> str:
    """`text` without its question words and question marks (unchanged if nothing is left)."""
    kept = [t for t in _WORD_OR_MARK.findall(text) if t != "?" and t.lower() not in QUESTION_WORDS]
    if not any(any(ch.isalnum() for ch in t) for t in kept):
        return text
    out = " ".join(kept)
    return re.sub(r"\s+([,.;:!])", r"\1", out)


def dense_text(query: str, names: frozenset[str]) -> str:
    """What is embedded for `query`: without the speakers' names, and with DECLARATIVE
    without its question words."""
    text = without_names(query, names)
    return declarative(text) if DECLARATIVE else text
