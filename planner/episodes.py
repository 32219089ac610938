"""Episode keys: each episode (a session, or the turn cache's time-gap group) as a
retrieval target of its own, that expands to its turns when it matches, the way
session-level keys raise recall in LongMemEval.

A question's words are often spread over an episode's turns ("what did Jo and her kids
make at the pottery class?": one turn says pottery, the next bowls, a third the kids),
so no single turn matches it well, while the episode as a whole does. An episode's key
is extractive: the terms it repeats (said in at least KEY_MIN_TF of its turns' words:
what the episode is about, not a word dropped once), scored against the query with bm25
over episodes (idf over episodes, an episode's length the sum of its turns'); and its
meaning, the mean cosine of its turns to the query. Both are standardised over the
conversation's episodes; an episode above the average (a positive sum) adds KEY_WEIGHT
times that sum to each of its turns.

Derived, rebuildable, nothing stored: the keys are computed per query from the turn
cache's keyword postings (tiers.lexical) and the cosines the first round already has,
so `rebuild` or a reload changes nothing and there is no migration.

Off by default (KEY_WEIGHT = 0, SPREAD_WEIGHT = 0): on the LoCoMo dev conversations both
measured worse than without them at every weight tried (README, issue 19); the code stays
so that `python -m tiermem.evals.recall_rounds` can measure them again.

Invariants: pure; deterministic; no word list, no name of any data set.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tiermem.tiers.lexical import BM25_B, BM25_K1, bm25_idf, query_terms
from tiermem.tiers.turncache import TurnTable

# On planner.rank's scale (z-score sums; the best turns score about 5-10). Chosen
# leave-one-conversation-out (README).
KEY_WEIGHT = 0.0  # off: it measured worse at every weight tried (README); the harness sets it
KEY_MIN_TF = 2  # a term is in an episode's key when the episode says it this often
MISSING_Z = -1.0  # an episode whose key holds no query term, as planner.rank counts a turn
MIN_EPISODES = 3  # fewer episodes: nothing to choose between
MAX_SESSION_Z = 3.0  # one episode's credit is capped at this many standard deviations


@dataclass(frozen=True)
class Keys:
    """Per turn of the table: the credit its episode's key earned (0: none)."""

    boost: np.ndarray

    def reason(self, i: int) -> str:
        return f", its episode's key {self.boost[i]:+.2f}" if self.boost[i] else ""


def _z(values: np.ndarray, valid: np.ndarray) -> np.ndarray:
    out = np.full(values.shape[0], MISSING_Z)
    if int(valid.sum()) < 2:
        out[valid] = 1.0
        return out
    v = values[valid]
    sd = float(v.std())
    out[valid] = (v - float(v.mean())) / (sd if sd > 1e-9 else 1.0)
    return out


def episode_ids(groups: np.ndarray) -> np.ndarray:
    """Small dense episode numbers from the turn cache's group ids."""
    ids = groups - groups.min()
    if int(ids.max()) >= 4 * groups.shape[0]:
        _u, ids = np.unique(groups, return_inverse=True)
    return ids.astype(np.int64)


def episode_keys(table: TurnTable, query: str, cosine: np.ndarray | None) -> Keys | None:
    """Each turn's credit from its episode's key (see the module docstring), or None when
    no episode stands out (too few episodes, no query term, no key weight)."""
    n = len(table)
    if not KEY_WEIGHT or n == 0 or table.lexical is None:
        return None
    ids = episode_ids(table.groups)
    g = int(ids.max()) + 1
    if g < MIN_EPISODES:
        return None
    lex = np.zeros(g)
    matched = np.zeros(g, dtype=bool)
    total, lengths, found = table.lexical.postings(query_terms(query), n)
    if total:
        ids_l = ids[:total]
        size = np.bincount(ids_l, weights=lengths, minlength=g)
        norm = BM25_K1 * (1.0 - BM25_B + BM25_B * size / (float(size.mean()) or 1.0))
        for _t, docs, tf in found:
            stf = np.bincount(ids_l[docs], weights=tf, minlength=g)
            stf[stf < KEY_MIN_TF] = 0.0
            df = int((stf > 0).sum())
            if df == 0:
                continue
            lex += bm25_idf(g, df) * stf * (BM25_K1 + 1.0) / (stf + norm)
            matched |= stf > 0
    score = _z(lex, matched)
    if cosine is not None:
        has = ~np.isnan(cosine)
        cnt = np.bincount(ids[has], minlength=g)
        mean = np.bincount(ids[has], weights=cosine[has], minlength=g) / np.maximum(cnt, 1)
        score = score + _z(mean, cnt > 0)
    per = KEY_WEIGHT * np.clip(score, 0.0, MAX_SESSION_Z)
    if not per.any():
        return None
    return Keys(per[ids])


# Covering episodes: evidence for a multi-hop question sits in two to four episodes, while
# planner.rank's episode context lifts the turns of the best one together. A turn that is
# the r-th best (0-based) of its episode loses SPREAD_WEIGHT * log(1 + r), so the best turns
# of the next episodes pass its fifth or tenth. Chosen leave-one-conversation-out (README).
SPREAD_WEIGHT = 0.0


def episode_spread(table: TurnTable, total: np.ndarray, eligible: np.ndarray) -> np.ndarray | None:
    """Per turn: minus SPREAD_WEIGHT * log(1 + its rank among its episode's eligible turns
    by `total`), 0 for the ineligible; None when off."""
    n = len(table)
    if not SPREAD_WEIGHT or n == 0:
        return None
    ids = episode_ids(table.groups)
    idx = np.flatnonzero(eligible)
    if idx.shape[0] == 0:
        return None
    order = idx[np.lexsort((-total[idx], ids[idx]))]  # by episode, best first within it
    g = ids[order]
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    rank = np.arange(order.shape[0]) - np.repeat(starts, np.diff(np.r_[starts, order.shape[0]]))
    out = np.zeros(n)
    out[order] = -SPREAD_WEIGHT * np.log1p(rank)
    return out
