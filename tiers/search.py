"""Lexical search helpers shared by every store engine: safe FTS query building,
stopwords, and reciprocal-rank fusion of several retrievers' lists.

Invariants:
- No user text can break a full-text query: every word becomes a quoted term.
- Fusion is deterministic: ties break by conversation key, then position.
"""

from __future__ import annotations

import re

from tiermem.tiers.models import SearchHit

DEFAULT_RRF_K = 60  # reciprocal-rank fusion's damping constant (Cormack et al. 2009)
MAX_FTS_TERMS = 32
# Words too common to help bm25 rank; dropping them also keeps FTS queries cheap.
STOPWORDS = frozenset(
    ["a", "an", "and", "are", "as", "at", "be", "but", "by", "did", "do", "does", "for", "from", "had", "has", "have", "he", "her", "him", "his", "how", "i", "if", "in", "into", "is", "it", "its", "me", "my", "of", "on", "or", "our", "she", "so", "that", "the", "their", "them", "then", "there", "these", "they", "this", "to", "us", "was", "we", "were", "what", "when", "where", "which", "who", "whom", "why", "will", "with", "would", "you", "your", "yours"]
)
_WORD = re.compile(r"\w+", re.UNICODE)


def query_words(text: str) -> list[str]:
    """The words of arbitrary user text worth searching for, in order: lower-cased `\\w+`
    words (no quote, backslash or operator can be in one), stopwords and repeats dropped,
    at most MAX_FTS_TERMS. Each engine quotes them in its own query syntax."""
    seen: list[str] = []
    for w in _WORD.findall(text.lower()):
        if w in STOPWORDS or w in seen:
            continue
        seen.append(w)
        if len(seen) >= MAX_FTS_TERMS:
            break
    return seen


def fts_query(text: str) -> str | None:
    """Turn arbitrary user text into a safe FTS5 query: each word a quoted string,
    OR-ed. Quotes, NEAR, `*`, `-`, `:` and column filters in user text become plain
    words, so no input can break the query syntax."""
    seen = query_words(text)
    if not seen:
        return None
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in seen)


def fuse(lists: dict[str, list[tuple[str, int, float]]], k: int, *, rrf_k: int = DEFAULT_RRF_K) -> list[SearchHit]:
    """Reciprocal-rank fusion: score = sum over retrievers of 1 / (rrf_k + rank). Equal
    scores keep the order the retrievers gave (best single rank, then first seen), never
    the keys' order: a key's spelling tells whether its id is used in another namespace."""
    scores: dict[tuple[str, int], float] = {}
    ranks: dict[tuple[str, int], dict[str, int]] = {}
    seen: dict[tuple[str, int], int] = {}
    for name, hits in lists.items():
        for rank, (conv, pos, _raw) in enumerate(hits, start=1):
            key = (conv, pos)
            scores[key] = scores.get(key, 0.0) + 1.0 / (rrf_k + rank)
            ranks.setdefault(key, {})[name] = rank
            seen.setdefault(key, len(seen))
    best = sorted(scores, key=lambda key: (-scores[key], min(ranks[key].values()), seen[key]))[:k]
    return [SearchHit(c, p, scores[(c, p)], ranks[(c, p)]) for c, p in best]
