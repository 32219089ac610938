"""Scoring every turn of a conversation against one query.

Dialogue is local: the words that match a question are often one turn away from the
answer ("what did you do?" / "I went hiking"), and the turns of one episode (a session,
or a stretch of talk without a long pause) are about the same things. So a turn's score
is not its similarity alone:

    base      = z(cosine to the query) + z(bm25 among the keyword matches)
    neighbour = NEIGHBOUR * max(base of the turn before, base of the turn after); with
                `replies`, a turn that asks nothing after one that asks a question
                takes REPLY (more) of the asking turn's base: the answer to a match
    episode   = EPISODE * mean of the best EPISODE_TOP (base + neighbour) in its episode
    date      = DATE * closeness of its time to a period the query names (1 inside it,
                at most OUTSIDE_CREDIT outside, nothing DATE_SLACK_DAYS away)
    score     = base + neighbour + episode + date

Both similarities are standardised over this conversation (z-scores), so they add up
on one scale whatever the retriever's raw units. A turn without a vector yet, or not
among the keyword matches, counts as MISSING_Z (a little below an average turn), not
as the worst turn: absence from one retriever is weak evidence.

Invariants: pure (no I/O); deterministic for the same inputs; every component is kept,
so the plan can say why a turn ranked where it did. The weights were chosen on the
LoCoMo dev conversations (see README, "Design notes"): the plateau is broad, neighbours
0.1-0.3, episodes 0.6-1.0 and missing 0 to -1 are within half a point of each other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tiermem.planner.dates import DAY_S, TimeWindow
from tiermem.tiers.turncache import TurnTable
from tiermem.tiers.vectors import row_dots

BM25_DEPTH = 100  # keyword matches standardised and scored; the rest count as missing
MISSING_Z = -1.0
NEIGHBOUR = 0.2
# When the retrieved turns have little room (at most REPLY_MAX_ROOM_TOKENS), a line is a
# slot, and the reply to a question that matches the query is a better use of it than the
# question or a second match of the same words ("What did you paint?" / "A sunset over the
# lake"). Chosen leave-one-conversation-out on the LoCoMo dev conversations (README,
# issue 19) from {0.3, 0.4, 0.6} at room gates 600 and 1,000 (every fold chose 0.6 at
# 1,000), and again from {off, 0.4, 0.6} once a turn that asks again stopped counting as a
# reply (every fold chose 0.6); ungated, it measured a wash or a loss at 2,000 and 4,000
# tokens, where both turns fit and the stronger credit only reorders.
REPLY = 0.6
REPLY_MAX_ROOM_TOKENS = 1000
EPISODE = 0.8
EPISODE_TOP = 3
EPISODE_KEY = 1e6
# A question that names a period ("in January 2022", "on 3 June") is answered by what was
# said in it far more often than by a better keyword match from another month: on the scale
# above (the best turns score about 5-10) the credit ranks the period's turns first. Chosen
# leave-one-conversation-out on the LoCoMo dev conversations from {1.5, 2, 3, 4, 5, 6, 8, 12,
# 16, and 6 / 8 / 12 with the timeline's told credit scaled alike}, one value for every budget
# (README, issue 19): two folds chose 8, one 12, one 8 with told credit 4; recall rises from
# 2 to 8 and is flat to 12. (It was 2.0.)
DATE = 8.0
DATE_SLACK_DAYS = 3.0  # a turn this many days outside a named period gets no date credit
OUTSIDE_CREDIT = 0.5  # the most a turn outside the period gets
# the share of the full date credit at or above which a turn counts as from the named
# period: inside it or close to its edges (OUTSIDE_CREDIT at most)
IN_PERIOD_SHARE = 0.5


@dataclass
class TurnScores:
    """Scores of every turn of `table` (index i is `table.positions[i]`)."""

    table: TurnTable
    total: np.ndarray
    cosine: np.ndarray | None  # raw cosine, NaN without a vector
    bm25_rank: dict[int, int]  # index -> 1-based rank among the keyword matches
    neighbour: np.ndarray
    episode: np.ndarray
    date: np.ndarray
    windows: Sequence[TimeWindow]
    dense_stats: tuple[float, float] | None  # mean, sd of the cosines (for other conversations' hits)
    bm25_stats: tuple[float, float] | None  # mean, sd of -bm25 over the matches

    def reason(self, i: int) -> str:
        parts = []
        if self.cosine is not None and not np.isnan(self.cosine[i]):
            parts.append(f"cosine {self.cosine[i]:.2f}")
        r = self.bm25_rank.get(i)
        if r is not None:
            parts.append(f"bm25 rank {r}")
        if abs(self.neighbour[i]) >= 0.05:
            parts.append(f"neighbours {self.neighbour[i]:+.2f}")
        if abs(self.episode[i]) >= 0.05:
            parts.append(f"episode {self.episode[i]:+.2f}")
        if self.date[i] > 0:
            names = ", ".join(f"'{w.text}'" for w in self.windows)
            parts.append(f"date {names} {self.date[i]:+.2f}")
        return ", ".join(parts) or "context only"

    def in_period(self) -> np.ndarray:
        """Per turn: whether it counts as from a period the query names (all False when
        it names none)."""
        return (self.date > 0) & (self.date >= IN_PERIOD_SHARE * DATE)

    def z_dense(self, cosine: float) -> float:
        if self.dense_stats is None:
            return MISSING_Z
        mu, sd = self.dense_stats
        return (cosine - mu) / sd

    def z_bm25(self, bm25: float | None) -> float:
        if bm25 is None:
            return MISSING_Z
        if self.bm25_stats is None:
            # this conversation has (almost) no keyword match, another one has: as for a
            # lone match here (_standardise), a clear lead rather than "missing"
            return 1.0
        mu, sd = self.bm25_stats
        return (-bm25 - mu) / sd


def replies_apply(room: int | None) -> bool:
    """Whether a query with `room` tokens for its retrieved turns credits replies (REPLY)."""
    return REPLY > NEIGHBOUR and (REPLY_MAX_ROOM_TOKENS <= 0 or (room is not None and room <= REPLY_MAX_ROOM_TOKENS))


def _standardise(values: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, tuple[float, float] | None]:
    out = np.full(values.shape[0], MISSING_Z, dtype=np.float64)
    if int(valid.sum()) < 2:
        # one match is a match: give it a clear lead, not a zero-variance NaN
        out[valid] = 1.0
        return out, None
    v = values[valid]
    mu, sd = float(v.mean()), float(v.std())
    sd = sd if sd > 1e-9 else 1.0
    out[valid] = (v - mu) / sd
    return out, (mu, sd)


def _episode_context(score: np.ndarray, groups: np.ndarray, top: int) -> np.ndarray:
    """Per turn: the mean of the best `top` scores of its episode."""
    n = score.shape[0]
    if n == 0:
        return score
    if n > 1 and bool((groups[1:] >= groups[:-1]).all()):
        padded = _episode_context_contiguous(score, groups, top)
        if padded is not None:
            return padded
    # group ids are small dense integers (the turn cache numbers episodes from 0), so
    # bincount indexes them directly; anything else is renumbered first
    ids = groups - groups.min()
    if int(ids.max()) >= 4 * n:
        _uniq, ids = np.unique(groups, return_inverse=True)
    # one float key sorts by group, best first within it (scores are z-sums, far below
    # EPISODE_KEY), faster than a two-key lexsort
    key = ids.astype(np.float64) * EPISODE_KEY - np.clip(score, -EPISODE_KEY / 2 + 1, EPISODE_KEY / 2 - 1)
    order = np.argsort(key, kind="stable")
    g = ids[order]
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    rank_in_group = np.arange(n) - np.repeat(starts, np.diff(np.r_[starts, n]))
    keep = rank_in_group < top
    size = int(ids.max()) + 1
    sums = np.bincount(g[keep], weights=score[order][keep], minlength=size)
    counts = np.bincount(g[keep], minlength=size)
    means = sums / np.maximum(counts, 1)
    return means[ids]


def _episode_context_contiguous(score: np.ndarray, groups: np.ndarray, top: int) -> np.ndarray | None:
    """`_episode_context` for episodes that are runs of consecutive turns (the turn
    cache's, in log order): one row per episode, a partial sort per row, no argsort of
    the whole conversation. None when the rows would be too ragged to pay."""
    n = score.shape[0]
    starts = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]])
    lengths = np.diff(np.r_[starts, n])
    width = int(lengths.max())
    if starts.shape[0] * width > 4 * n:
        return None
    row = np.repeat(np.arange(starts.shape[0]), lengths)
    grid = np.full((starts.shape[0], width), -np.inf)
    grid[row, np.arange(n) - starts[row]] = score
    k = min(top, width)
    best = -np.partition(-grid, k - 1, axis=1)[:, :k] if k < width else grid
    best = np.where(np.isfinite(best), best, 0.0)
    means = best.sum(axis=1) / np.minimum(lengths, k)
    return means[row]


def _date_closeness(created: np.ndarray, windows: Sequence[TimeWindow]) -> np.ndarray:
    out = np.zeros(created.shape[0], dtype=np.float64)
    slack = DATE_SLACK_DAYS * DAY_S
    for w in windows:
        outside = np.maximum(w.start - created, 0.0) + np.maximum(created - w.end, 0.0)
        # inside the period: full credit; just outside it (a question's "on 3 June" may
        # be about something told a day or two later) at most half, fading to nothing
        near = np.where(outside > 0, OUTSIDE_CREDIT * np.clip(1.0 - outside / slack, 0.0, 1.0), 1.0)
        out = np.maximum(out, near)
    return out


def score_turns(
    table: TurnTable,
    query_vec: np.ndarray | None,
    bm25_hits: Sequence[tuple[int, float]],
    windows: Sequence[TimeWindow] = (),
    *,
    replies: bool = False,
) -> TurnScores:
    """Score every turn; `bm25_hits` are (position, bm25) best first (lower bm25 is better).
    `replies`: the turn after a question takes REPLY of its base (see replies_apply)."""
    n = len(table)
    cosine: np.ndarray | None = None
    dense_stats = None
    if query_vec is not None and table.vectors is not None and n:
        q = np.asarray(query_vec, dtype=np.float32)
        if q.shape[0] == table.vectors.shape[1]:
            cosine = row_dots(table.vectors, q).astype(np.float64)
            cosine[~table.has_vec] = np.nan
    if cosine is not None:
        zd, dense_stats = _standardise(cosine, table.has_vec)
    else:
        zd = np.full(n, MISSING_Z, dtype=np.float64)
    raw_bm = np.zeros(n, dtype=np.float64)
    matched = np.zeros(n, dtype=bool)
    bm25_rank: dict[int, int] = {}
    for rank, (pos, bm) in enumerate(bm25_hits[:BM25_DEPTH], start=1):
        i = table.index_of(pos)
        if i is None or matched[i]:
            continue
        raw_bm[i] = -bm
        matched[i] = True
        bm25_rank[i] = rank
    zb, bm25_stats = _standardise(raw_bm, matched)
    base = zd + zb
    if n > 1:
        before = np.r_[-np.inf, base[:-1]]
        after = np.r_[base[1:], -np.inf]
        neighbour = NEIGHBOUR * np.maximum(before, after)
        if replies and table.asks is not None and table.asks.shape[0] == n:
            # a turn that asks again is no answer (a user's flow of questions nobody replied to)
            rep = np.flatnonzero(table.asks[:-1] & ~table.asks[1:]) + 1
            neighbour[rep] = np.maximum(max(REPLY, NEIGHBOUR) * before[rep], NEIGHBOUR * after[rep])
    else:
        neighbour = np.zeros(n)
    local = base + neighbour
    episode = EPISODE * _episode_context(local, table.groups, EPISODE_TOP)
    date = DATE * _date_closeness(table.created, windows) if windows else np.zeros(n)
    return TurnScores(table, local + episode + date, cosine, bm25_rank, neighbour, episode, date, windows,
                      dense_stats, bm25_stats)
