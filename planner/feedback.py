"""Pseudo-relevance feedback for recall questions: the first round's best turns say what
the question is about in the conversation's own words, and turns that share those words
(or that meaning) but none of the question's are lifted toward the candidates.

"What activities has Jo done with her family?" matches "my kids loved the pottery class"
and "we painted together"; the turn "we went camping with my fam" shares no word with the
question and its vector is far from it, but it shares "kids", "camping" and the like with
those best turns. Two forms, each off unless its weight is set:

- lexical (RM3, Lavrenko and Croft 2001; Abdul-Jaleel et al. 2004): the FB_DOCS best
  eligible turns by the first round's score (planner.rank's with the planner's boosts)
  are read; each term's weight is the sum over them of its share of the turn's terms,
  times the turn's feedback weight (linear in its rank), times its idf in this
  conversation; the FB_TERMS heaviest terms not in the query (no stopword, no term of
  only one turn, none of more than COMMON_SHARE of them) are searched for with
  weighted bm25 over the turn cache's keyword postings. A turn gets up to PRF_WEIGHT,
  in proportion to its score against the best match.
- dense (Rocchio 1971): the mean vector of the same turns; a turn gets ROCCHIO_WEIGHT
  times the positive part of its cosine to that mean, standardised over the turns.

Invariants: the credit is never negative (as planner.rounds' other credits: a turn the
first round ranks high stays there unless a linked turn passes it); the feedback turns
themselves get none (they are the first round's own finds); pure but for `read`, the
caller's reader of the feedback turns' texts; deterministic; nothing stored (derived per
call from the turn cache's postings and vectors); no word list names a person, topic or
date of any data set: weights are the conversation's own frequencies.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tiermem.tiers.lexical import BM25_B, BM25_K1, bm25_idf, doc_terms, query_terms
from tiermem.tiers.search import STOPWORDS
from tiermem.tiers.turncache import TurnTable
from tiermem.tiers.vectors import row_dots

# On planner.rank's scale (z-score sums; the best turns score about 5-10). Off (0.0)
# unless chosen leave-one-conversation-out (README, issue 19).
PRF_WEIGHT = 0.0
ROCCHIO_WEIGHT = 0.0
FB_DOCS = 10  # first-round turns whose words (and vectors) are the feedback
FB_TERMS = 10  # expansion terms searched for
# A term in more than this share of the conversation's turns says nothing about a topic
# (the small talk of every other turn); one in a single turn links it to nothing.
COMMON_SHARE = 0.05
MIN_TERM_TURNS = 2
MIN_TERM_CHARS = 3  # shorter words say little (digits excepted)
MAX_ROCCHIO_Z = 3.0  # one turn's dense credit is capped at this many standard deviations


@dataclass(frozen=True)
class Feedback:
    """Per turn of the table: the lexical and the dense feedback credit (0: none), and
    the expansion terms searched for."""

    lexical: np.ndarray
    dense: np.ndarray
    terms: tuple[str, ...] = ()

    @property
    def boost(self) -> np.ndarray:
        return self.lexical + self.dense

    def reason(self, i: int) -> str:
        out = ""
        if self.lexical[i]:
            out += f", feedback words ({', '.join(self.terms[:4])}) {self.lexical[i]:+.2f}"
        if self.dense[i]:
            out += f", near the best turns' meaning {self.dense[i]:+.2f}"
        return out


def expansion_terms(texts: list[str], query: str, table: TurnTable,
                    limit: int | None = None) -> list[tuple[str, float]]:
    """RM3's expansion terms of the feedback `texts` (best first): (index term, weight),
    heaviest first, none of the query's; weights sum to 1. `limit`: at most this many
    (None: FB_TERMS as it is at the call, so a what-if that sets it takes effect; a
    default of FB_TERMS would be fixed at import)."""
    if limit is None:
        limit = FB_TERMS
    if table.lexical is None or not texts:
        return []
    skip = set(query_terms(query))
    mass: dict[str, float] = {}
    k = len(texts)
    for rank, text in enumerate(texts):
        words = [w for w in doc_terms(text) if w not in skip and w not in STOPWORDS
                 and (len(w) >= MIN_TERM_CHARS or w.isdigit())]
        if not words:
            continue
        doc_weight = (k - rank) / k  # the best feedback turn counts most
        for t, c in Counter(words).items():
            mass[t] = mass.get(t, 0.0) + doc_weight * c / len(words)
    if not mass:
        return []
    total, _lengths, found = table.lexical.postings(list(mass), len(table))
    if not total:
        return []
    common = max(MIN_TERM_TURNS, int(COMMON_SHARE * total))
    scored = [(mass[t] * bm25_idf(total, docs.shape[0]), t) for t, docs, _tf in found
              if MIN_TERM_TURNS <= docs.shape[0] <= common]
    scored.sort(key=lambda x: (-x[0], x[1]))
    best = scored[:limit]
    norm = sum(w for w, _t in best)
    return [(t, w / norm) for w, t in best] if norm > 0 else []


def weighted_bm25(table: TurnTable, terms: list[tuple[str, float]]) -> np.ndarray:
    """Per turn: bm25 (higher is better, as a positive score) of the weighted `terms`."""
    n = len(table)
    score = np.zeros(n)
    if table.lexical is None or not terms:
        return score
    weight = dict(terms)
    total, lengths, found = table.lexical.postings([t for t, _w in terms], n)
    if not total:
        return score
    avgdl = float(lengths.mean()) or 1.0
    norm = BM25_K1 * (1.0 - BM25_B + BM25_B * lengths / avgdl)
    for t, docs, tf in found:
        score[docs] += weight[t] * bm25_idf(total, docs.shape[0]) * tf * (BM25_K1 + 1.0) / (tf + norm[docs])
    return score


def feedback(table: TurnTable, total: np.ndarray, eligible: np.ndarray, query: str,
             read: Callable[[list[int]], dict[int, str]]) -> Feedback | None:
    """The feedback credit per turn (see the module docstring), or None when it adds none
    (both weights off, no eligible turn, nothing found)."""
    n = len(table)
    if n == 0 or (not PRF_WEIGHT and not ROCCHIO_WEIGHT):
        return None
    idx = np.flatnonzero(eligible)
    if idx.shape[0] == 0:
        return None
    seeds = idx[np.argsort(-total[idx], kind="stable")[:min(FB_DOCS, idx.shape[0])]]
    lexical = np.zeros(n)
    dense = np.zeros(n)
    terms: list[tuple[str, float]] = []
    if PRF_WEIGHT and table.lexical is not None:
        texts = read([int(table.positions[i]) for i in seeds])
        terms = expansion_terms([texts.get(int(table.positions[i]), "") for i in seeds], query, table)
        score = weighted_bm25(table, terms)
        top = float(score.max()) if n else 0.0
        if top > 0:
            lexical = PRF_WEIGHT * score / top
    if ROCCHIO_WEIGHT and table.vectors is not None:
        have = seeds[table.has_vec[seeds]]
        if have.shape[0]:
            w = (have.shape[0] - np.arange(have.shape[0])) / have.shape[0]  # linear in rank, as the words'
            centre = (table.vectors[have] * w[:, None]).sum(axis=0)
            size = float(np.linalg.norm(centre))
            if size > 1e-9:
                cos = row_dots(table.vectors, centre / size).astype(np.float64)
                v = cos[table.has_vec]
                if v.shape[0] >= 2 and float(v.std()) > 1e-9:
                    z = (cos - float(v.mean())) / float(v.std())
                    dense = ROCCHIO_WEIGHT * np.clip(np.where(table.has_vec, z, 0.0), 0.0, MAX_ROCCHIO_Z)
    lexical[seeds] = 0.0
    dense[seeds] = 0.0
    if not lexical.any() and not dense.any():
        return None
    return Feedback(lexical, dense, tuple(t for t, _w in terms))
