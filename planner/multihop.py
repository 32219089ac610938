"""A second retrieval round for questions whose answer spans turns that do not share the
question's words (multi-hop): "Where did Ann move from?" finds "I moved here from Sweden
four years ago"; the turn that says "my grandma back in Sweden sent me a necklace" shares
no word with the question, only the entity with the first turn.

`second_round` takes the best SEED_TURNS turns of the first round (planner.rank's scores
with the planner's boosts), reads each one's salient terms (`salient_terms`: names,
places, numbers and words rare in this conversation, that the query does not already
hold) and searches the conversation again with them (bm25 over the turn cache's keyword
index), and, when HOP_DENSE_WEIGHT is set, by the seed turn's own vector. A turn the
second round finds gets up to HOP_WEIGHT (HOP_DENSE_WEIGHT), in proportion to its score
against the best match of that seed, the largest over the seeds: a discount on the first
round's scale, so a hop reorders close candidates and lifts a linked turn from far down
without outranking the question's own matches.

Invariants: pure but for `read`, the caller's reader of the seeds' texts (the cold log);
deterministic; nothing stored (the keyword index and the vectors are the turn cache's
derived data); only recall questions hop (the caller decides); no word list names a
person, topic or date of any data set: salience is the conversation's own document
frequency and the text's own capitalisation.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from tiermem.tiers.lexical import doc_terms, query_terms
from tiermem.tiers.search import STOPWORDS
from tiermem.tiers.turncache import TurnTable
from tiermem.tiers.vectors import row_dots

SEED_TURNS = 3  # first-round turns whose terms seed the second round
HOP_TERMS = 5  # salient terms of one seed searched for (the rarest first)
HOP_DEPTH = 30  # second-round keyword matches per seed that get credit
# On planner.rank's scale (z-score sums; the best turns score about 5-10): the best
# second-round match of a seed gets this much. Chosen leave-one-conversation-out (README).
HOP_WEIGHT = 0.5
# The hop runs only when the retrieved turns have at least this much room: below it
# (budgets up to 1,000 tokens) every held-out fold did as well or better without it, the
# room being too small for linked turns beside the question's own matches (README).
HOP_MIN_ROOM_TOKENS = 1500
# the same for the seed's nearest turns by meaning: off, no better than the keyword hop
# alone and worse on one held-out conversation (README)
HOP_DENSE_WEIGHT = 0.0
HOP_DENSE_DEPTH = 20  # nearest turns per seed that get dense credit
# Only turns of other episodes than the seed's get credit: the hop is there to link
# episodes (multi-hop evidence sits in two to four of them).
HOP_OTHER_EPISODES = True
# A term is salient when at most this share of the conversation's turns hold it (a name
# or an event mentioned now and then, not a word of every other turn) ...
RARE_SHARE = 0.02
# ... or, written capitalised inside a sentence (a name, a place) or with digits, this share
ENTITY_SHARE = 0.05
MIN_RARE_TURNS = 2  # a conversation too short for shares: a term in this many turns is rare
MIN_TERM_CHARS = 3  # shorter words say little (digits excepted)
MIN_LINK_TURNS = 2  # a term must be in the seed and at least one other turn

_WORD = re.compile(r"[^\W_]+")
_SENTENCE_END = re.compile(r"[.!?:;\"'()\[\]]\s*$")


@dataclass(frozen=True)
class Hop:
    """What the second round found: per turn of the table, its credit and the seed
    (a table index, -1: none) that brought it; each seed's terms."""

    boost: np.ndarray
    via: np.ndarray
    terms: dict[int, tuple[str, ...]] = field(default_factory=dict)

    def reason(self, i: int, table: TurnTable) -> str:
        s = int(self.via[i])
        if s < 0 or not self.boost[i]:
            return ""
        words = ", ".join(self.terms.get(s, ()))
        return f", second round via #{int(table.positions[s])} ({words}) {self.boost[i]:+.2f}"


def _word_term(w: str, skip: set[str]) -> tuple[str | None, bool]:
    """A word's index term for `salient_terms` (None: a stopword, too short, no term, or
    in the query) and whether it holds a digit."""
    if w.lower() in STOPWORDS or (len(w) < MIN_TERM_CHARS and not w.isdigit()):
        return None, False
    terms = doc_terms(w)
    if not terms or terms[0] in skip:
        return None, False
    return terms[0], any(ch.isdigit() for ch in w)


def salient_terms(text: str, query: Sequence[str], table: TurnTable, limit: int = HOP_TERMS) -> list[str]:
    """The index terms of `text` (a turn of `table`) worth a second search: not in `query`
    (index terms), not stopwords, in at least one other turn, and rare (RARE_SHARE) or
    entity-like (capitalised inside a sentence, or with digits; ENTITY_SHARE); entity-like
    ones first, then the rarest in the conversation. One pass: linear in the text's length."""
    if table.lexical is None or not text:
        return []
    n = len(table)
    skip = set(query)
    entity: dict[str, bool] = {}
    # each distinct word's term (None: skipped) and whether it holds a digit, worked out once:
    # a 100 kB tool output holds ~17k words but far fewer distinct ones
    words: dict[str, tuple[str | None, bool]] = {}
    gap = 0  # where the text between the previous word and this one starts
    for m in _WORD.finditer(text):
        start, since, gap = m.start(), gap, m.end()
        w = m.group(0)
        known = words.get(w)
        if known is None:
            known = words[w] = _word_term(w, skip)
        term, digit = known
        if term is None or entity.get(term):
            continue  # skipped, or entity-like already (a later place cannot undo it)
        # Inside a sentence: the text before the word does not end in a sentence end
        # (_SENTENCE_END). Searched in the gap since the previous word only, never the
        # whole prefix (that was quadratic: ~12 s for a tool round of 10 x 100 kB): the
        # gap holds no word character and the prefix ends with it, so a punctuation mark
        # followed by nothing but whitespace to the word lies in the gap or nowhere.
        inside = start > 0 and not _SENTENCE_END.search(text, since, start)
        entity[term] = (w[0].isupper() and inside) or digit
    if not entity:
        return []
    total, _lengths, found = table.lexical.postings(list(entity), n)
    if not total:
        return []
    rare = max(MIN_RARE_TURNS, math.floor(RARE_SHARE * total))
    common = max(MIN_RARE_TURNS, math.floor(ENTITY_SHARE * total))
    # a term only this turn holds links it to nothing; entity-like terms first, then the rarest
    kept = [(not entity[t], docs.shape[0], t) for t, docs, _tf in found
            if MIN_LINK_TURNS <= docs.shape[0] <= (common if entity[t] else rare)]
    kept.sort()
    return [t for _e, _df, t in kept[:limit]]


def second_round(table: TurnTable, total: np.ndarray, eligible: np.ndarray, query: str,
                 read: Callable[[list[int]], dict[int, str]]) -> Hop | None:
    """The second round's credit per turn (see the module docstring), or None when it
    finds nothing (no keyword index, no eligible seed, no salient term)."""
    n = len(table)
    if n == 0 or (not HOP_WEIGHT and not HOP_DENSE_WEIGHT) or table.lexical is None:
        return None
    idx = np.flatnonzero(eligible)
    if idx.shape[0] == 0:
        return None
    k = min(SEED_TURNS, idx.shape[0])
    seeds = idx[np.argsort(-total[idx], kind="stable")[:k]]
    texts = read([int(table.positions[i]) for i in seeds])
    qterms = query_terms(query)
    boost = np.zeros(n)
    via = np.full(n, -1, dtype=np.int64)
    used: dict[int, tuple[str, ...]] = {}

    def credit(s: int, hits: np.ndarray, share: np.ndarray, weight: float) -> None:
        gain = weight * share
        if HOP_OTHER_EPISODES:  # the seed's own episode is lifted by planner.rank's episode context already
            gain = np.where(table.groups[hits] == table.groups[s], 0.0, gain)
        better = gain > boost[hits]
        boost[hits[better]] = gain[better]
        via[hits[better]] = s

    for s in (int(i) for i in seeds):
        if HOP_WEIGHT:
            terms = salient_terms(texts.get(int(table.positions[s]), ""), qterms, table)
            found = [(i, -bm) for i, bm in table.lexical.search_terms(terms, HOP_DEPTH + 1, n) if i != s][:HOP_DEPTH]
            if found:
                used[s] = tuple(terms)
                hits = np.array([i for i, _ in found], dtype=np.int64)
                sc = np.array([v for _, v in found])
                credit(s, hits, sc / max(float(sc.max()), 1e-9), HOP_WEIGHT)
        if HOP_DENSE_WEIGHT and table.vectors is not None and bool(table.has_vec[s]):
            cos = row_dots(table.vectors, table.vectors[s])
            cos = np.where(table.has_vec, cos, -np.inf)
            cos[s] = -np.inf
            d = min(HOP_DENSE_DEPTH, n - 1)
            if d > 0:
                near = np.argpartition(-cos, d - 1)[:d]
                near = near[np.isfinite(cos[near])]
                if near.shape[0]:
                    c = cos[near]
                    lo = float(c.min())
                    span = float(c.max()) - lo
                    share = (c - lo) / span if span > 1e-9 else np.ones_like(c)
                    credit(s, near.astype(np.int64), share, HOP_DENSE_WEIGHT)
                    used.setdefault(s, ())
    boost[seeds] = 0.0  # a seed is the first round's own find
    via[seeds] = -1
    if not boost.any():
        return None
    return Hop(boost, via, used)
