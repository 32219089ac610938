"""Is there recall left in the retrieved block's ranking? An offline probe (issue 19).

    python -m tiermem.evals.fusion_probe --data ../shared/data/locomo-dev.json \\
        --budgets 500,1000,2000,4000 --data-root /tmp/rr/data

The planner scores a turn as a sum of parts (planner.rank, planner.candidates): the
query's cosine and bm25 z-scores, its neighbours', its episode's, the date credit, the
timeline's, the named speaker's, the second round's and recency. Their weights were
chosen one at a time on the dev conversations. This probe asks two questions, each
answered by leave-one-conversation-out (a setting is chosen on the pooled recall of
every budget over the other conversations and scored on the held-out one, as in
`evals.recall_rounds --loo`):

- `fusion`: would the best weights for all parts at once, found by coordinate search,
  rank the evidence higher on a conversation they were not chosen on?
- `sentences`, `pairs`, `expansion`: would one more signal from the same model help:
  the best cosine among a turn's sentences (a long turn's matching sentence is diluted
  in its mean-pooled vector), the cosine of a turn joined to the one before it (the
  question a reply answers), or keyword matches of words near the query's words in the
  model's space ("kids" for "family")?

How: every question with evidence is asked as a what-if context (`record=False`) at
every budget, with the shipped weights, each sample in its own Memory (as in
evals.recall_rounds, whose `prepared` it uses). A tap on planner.candidates records each
part of every turn's score for that call, the room its retrieved block had and the
positions the other layers showed. The probe then packs the retrieved block again
offline: the eligible turns best first, each costing its rendered line's tokens and a
heading's share (as planner.candidates counts them), into that room. Its recall with
the shipped weights is printed beside the planner's own (restricted to the retrieved
block: evidence in the tail or the pinned block is left out of both), so the packer's
error is on the table next to any gain.

Invariants: reads only (what-if contexts, no store written but the data root's own
Memories, as evals.recall_rounds); the tap restores the module's functions on exit;
nothing here names a sample, a speaker, a topic or a question; extra signals come from
the Memory's own embedder and texts, computed per run, never stored.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import re
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tiermem.evals.recall_rounds import add_recall_args, load_checked, prepared, report
from tiermem.planner import candidates, rank
from tiermem.planner.excerpt import sentences
from tiermem.planner.query_text import dense_text
from tiermem.planner.render import HEADING_SHARE_TOKENS
from tiermem.tiers.models import message_text
from tiermem.tiers.search import STOPWORDS

# the parts of planner.candidates' score, in the order of a row's columns
PARTS = ("cosine", "bm25", "neighbour", "episode", "date", "told", "speaker", "rounds", "recency")
# their shipped weights on those columns (the rank parts are recorded unweighted)
SHIPPED = {"cosine": 1.0, "bm25": 1.0, "neighbour": rank.NEIGHBOUR, "episode": rank.EPISODE, "date": 1.0,
           "told": 1.0, "speaker": 1.0, "rounds": 1.0, "recency": candidates.RECENCY_WEIGHT}
# coordinate search: the values each weight may take (cosine stays 1: the scale)
GRID = {"bm25": (0.4, 0.6, 0.8, 1.0, 1.2, 1.5, 2.0), "neighbour": (0.0, 0.1, 0.2, 0.3, 0.5),
        "episode": (0.4, 0.6, 0.8, 1.0, 1.2), "date": (0.5, 1.0, 1.5), "told": (0.5, 1.0, 1.5),
        "speaker": (0.0, 0.25, 0.5, 0.75, 1.0, 1.5), "rounds": (0.0, 0.5, 1.0, 1.5),
        "recency": (0.0, 0.15, 0.5, 1.0)}
SEARCH_PASSES = 2
MIN_GAIN_POINTS = 0.02  # a coordinate step must raise pooled recall by this much to be taken
EXTRA = ("sentences", "pairs", "expansion")
EXTRA_WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0)
STOP_ROOM_TOKENS = 15  # the offline packer stops when less than this is left
PACK_DEPTH = 300  # lines the offline packer looks at, best first
MIN_SENTENCE_WORDS = 3  # shorter sentences ("Wow!") are not embedded on their own
EXPANSION_MIN_COSINE = 0.6  # a word this close to a query word stands in for it
EXPANSION_NEIGHBOURS = 5  # words taken per query word, closest first
SAME_WORD_PREFIX = 4  # words sharing this many first letters are one word's forms (bm25 has them)
_WORD = re.compile(r"[a-z][a-z'-]{2,}")
_IMAGE = re.compile(r"\[image:[^\]]*\]")


@dataclass
class Row:
    """One what-if context: the parts of every turn's score, and what the block held."""

    sample: str  # its label (locomo.sample_labels): a repeated sample_id gets -2, -3, ...
    question: str
    budget: int
    evidence: list[int]
    positions: np.ndarray
    cost: np.ndarray  # tokens a retrieved line costs (its rendered line and heading share)
    parts: np.ndarray  # (turns, len(PARTS) + extra columns)
    eligible: np.ndarray  # bool: the planner could retrieve it (not shown by another layer)
    room: int  # tokens the planner's retrieved block held
    planner_hit: float  # the planner's own recall in its retrieved block


def pack(row: Row, weights: np.ndarray | None = None, *, scores: np.ndarray | None = None) -> set[int]:
    """The positions the offline packer shows: eligible turns best first, greedily, a
    line that does not fit is skipped (as planner.pack does). Best by `row.parts @ weights`,
    or by `scores` (one per turn, a learned model's: evals.ltr_probe) with ties broken by
    the shipped weights' score."""
    idx = np.flatnonzero(row.eligible)
    if scores is None:
        if weights is None:
            raise TypeError("pack needs weights or scores")
        score = row.parts @ weights
        order = idx[np.argsort(-score[idx], kind="stable")][:PACK_DEPTH]
    else:
        tie = row.parts @ shipped_weights()
        order = idx[np.lexsort((-tie[idx], -scores[idx]))][:PACK_DEPTH]
    return pack_order(row, order)


def pack_order(row: Row, order: Sequence[int] | np.ndarray) -> set[int]:
    """The positions shown packing `order` (indexes into the row, best first) greedily: a
    line that does not fit is skipped, packing stops below STOP_ROOM_TOKENS left; an index
    met again is skipped (evals.div_probe's orders may repeat one, pack's never do)."""
    left, got, seen = row.room, set(), set()
    for i in order:
        if i in seen:
            continue
        seen.add(i)
        if row.cost[i] <= left:
            left -= int(row.cost[i])
            got.add(int(row.positions[i]))
        if left < STOP_ROOM_TOKENS:
            break
    return got


def recall(rows: Sequence[Row], weights: np.ndarray) -> float:
    """Mean per-question evidence recall, in %."""
    if not rows:
        return 0.0
    return 100.0 * sum(len(set(r.evidence) & pack(r, weights)) / len(r.evidence) for r in rows) / len(rows)


@contextlib.contextmanager
def tapped(record: dict[str, Any]) -> Iterator[None]:
    """planner.candidates' scoring functions, wrapped to leave their results in `record`
    (cleared by the caller per call); restored on exit."""
    saved = {name: getattr(candidates, name) for name in
             ("score_turns", "timeline_boost", "speaker_boost", "more_rounds")}

    def wrap(name: str, keep: Callable[[tuple[Any, ...], Any], None]) -> Callable[..., Any]:
        def inner(*args: Any, **kwargs: Any) -> Any:
            out = saved[name](*args, **kwargs)
            keep(args, out)
            return out
        return inner

    def keep_rounds(args: tuple[Any, ...], out: Any) -> None:
        record["rounds"] = None if out is None else out.boost
        record["eligible"] = np.asarray(args[4]).copy()

    wrappers = {"score_turns": wrap("score_turns", lambda a, o: record.update(scores=o, table=a[0])),
                "timeline_boost": wrap("timeline_boost", lambda a, o: record.update(told=o)),
                "speaker_boost": wrap("speaker_boost", lambda a, o: record.update(speaker=o)),
                "more_rounds": wrap("more_rounds", keep_rounds)}
    for name, fn in wrappers.items():
        setattr(candidates, name, fn)
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(candidates, name, fn)


def parts_of(record: dict[str, Any]) -> np.ndarray:
    """The recorded call's score parts per turn, unweighted where rank weighs them."""
    s, table = record["scores"], record["table"]
    n = len(table)
    if s.cosine is not None and s.dense_stats is not None:
        mu, sd = s.dense_stats
        zd = np.where(np.isnan(s.cosine), rank.MISSING_Z, (np.nan_to_num(s.cosine) - mu) / sd)
    else:
        zd = np.full(n, rank.MISSING_Z)
    zb = s.total - s.neighbour - s.episode - s.date - zd
    neighbour = s.neighbour / rank.NEIGHBOUR if rank.NEIGHBOUR else np.zeros(n)
    episode = s.episode / rank.EPISODE if rank.EPISODE else np.zeros(n)
    rounds = record["rounds"] if record.get("rounds") is not None else np.zeros(n)
    recency = table.positions / max(1, int(table.positions[-1]))
    return np.stack([zd, zb, neighbour, episode, s.date, record["told"], record["speaker"], rounds, recency], 1)


def zscore(x: np.ndarray) -> np.ndarray:
    """`x` as z-scores; a (near-)constant `x` scores all zero."""
    sd = float(x.std())
    return (x - float(x.mean())) / (sd if sd > 1e-9 else 1.0)


@dataclass
class Signals:
    """One conversation's extra signals' inputs, from the Memory's embedder."""

    positions: np.ndarray
    sentence_vecs: np.ndarray
    sentence_owner: np.ndarray  # row index into positions
    pair_vecs: np.ndarray
    words: list[str]
    word_vecs: np.ndarray
    postings: dict[str, list[int]]  # word -> row indexes
    names: frozenset[str]
    embed: Callable[[list[str]], np.ndarray]
    query_words: dict[str, np.ndarray] = field(default_factory=dict)  # embedded once per run

    def word_vec(self, word: str) -> np.ndarray:
        if word not in self.query_words:
            self.query_words[word] = self.embed([word])[0]
        return self.query_words[word]

    @classmethod
    def of(cls, texts: dict[int, str], names: frozenset[str], embed: Callable[[list[str]], np.ndarray]) -> Signals:
        positions = np.array(sorted(texts))
        body = [texts[int(p)] for p in positions]
        sents, owner = [], []
        for i, t in enumerate(body):
            clean = _IMAGE.sub("", t).strip() or t
            parts = [s for s in sentences(clean) if len(s.split()) >= MIN_SENTENCE_WORDS] or [clean]
            sents += parts
            owner += [i] * len(parts)
        pairs = [body[i - 1] + " " + body[i] if i else body[i] for i in range(len(body))]
        lower = {n.lower() for n in names}
        postings: dict[str, list[int]] = defaultdict(list)
        for i, t in enumerate(body):
            for w in sorted(set(_WORD.findall(t.lower()))):
                if w not in STOPWORDS and w not in lower:
                    postings[w].append(i)
        words = sorted(postings)
        return cls(positions, embed(sents), np.array(owner), embed(pairs), words,
                   embed(words) if words else np.zeros((0, 1)), dict(postings), frozenset(lower), embed)

    def columns(self, question: str, qvec: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """(turns, 3): z(best sentence cosine), z(pair cosine), the expansion's score."""
        n = len(self.positions)
        best = np.full(n, -1.0)
        np.maximum.at(best, self.sentence_owner, self.sentence_vecs @ qvec)
        pair = self.pair_vecs @ qvec
        expansion = np.zeros(n)
        for qw in sorted(set(_WORD.findall(question.lower()))):
            if qw in STOPWORDS or qw in self.names or not self.words:
                continue
            sims = self.word_vecs @ self.word_vec(qw)
            near = np.zeros(n)
            taken = 0
            for j in np.argsort(-sims):
                w = self.words[int(j)]
                if sims[j] < EXPANSION_MIN_COSINE or taken >= EXPANSION_NEIGHBOURS:
                    break
                if w[:SAME_WORD_PREFIX] == qw[:SAME_WORD_PREFIX]:
                    continue
                taken += 1
                df = len(self.postings[w])
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                rows = np.array(self.postings[w])
                near[rows] = np.maximum(near[rows], float(sims[j]) * idf)
            expansion += near
        hit = expansion > 0
        if int(hit.sum()) > 1:
            # a match is a lead, as a keyword match is in planner.rank: above every non-match
            expansion[hit] = zscore(expansion[hit]) + 1.0
        idx = np.searchsorted(self.positions, positions)
        return np.stack([zscore(best), zscore(pair), expansion], 1)[idx]


def capture(data: Path, budgets: Sequence[int], data_root: Path, *,
            sample_questions: int | None = None,
            on_sample: Callable[[Any, Any, list[Any]], None] | None = None) -> list[Row]:
    """Every question with evidence at every budget, as the shipped planner ranks it.
    `on_sample(prepared, table, messages)`, when given, sees each sample's Memory before its
    questions (evals.ltr_probe reads its per-turn facts there)."""
    rows: list[Row] = []
    record: dict[str, Any] = {}
    # the hop runs at every budget the shipped planner runs it at: its room gate is the planner's
    with tapped(record):
        for prep in prepared(load_checked(data), data_root, hot=True, sample_questions=sample_questions):
            memory, cid = prep.memory, prep.ingested.conversation_id
            table = memory.planner.turns.get(cid)
            msgs = memory.cold.get(cid, table.positions.tolist())
            texts = {m.position: message_text(m.body) for m in msgs}
            # what a retrieved line costs, counted as planner.candidates counts it
            render = memory.planner.render
            line_cost = {m.position: render.line_tokens(render.line(m, dated=False, zone=memory.planner.settings.zone)[0]) + HEADING_SHARE_TOKENS
                         for m in msgs}
            if on_sample is not None:
                on_sample(prep, table, msgs)
            embed = memory.embedder.embed
            signals = Signals.of(texts, table.names, embed)
            for q in prep.questions:
                question = q.qa.question
                qvec = embed([dense_text(question, table.names)])[0]
                for b in budgets:
                    record.clear()
                    ctx = memory.context(cid, question, budget=b, namespace=cid, record=False)
                    if "scores" not in record or "eligible" not in record:
                        continue  # not a recall-class ranking (no second round was asked for)
                    t = record["table"]
                    shown = {p for it in ctx.plan.items if it.slice != "retrieved" for p in it.positions}
                    got = {p for it in ctx.plan.items if it.slice == "retrieved" for p in it.positions}
                    eligible = record["eligible"] & ~np.isin(t.positions, list(shown))
                    ev = list(q.evidence_positions)
                    rows.append(Row(
                        prep.label, question, b, ev, t.positions.copy(),
                        np.array([line_cost.get(int(p), int(n) + HEADING_SHARE_TOKENS)
                                  for p, n in zip(t.positions, t.tokens, strict=True)]),
                        np.concatenate([parts_of(record), signals.columns(question, qvec, t.positions)], 1),
                        eligible, sum(it.tokens for it in ctx.plan.items if it.slice == "retrieved"),
                        len(set(ev) & got) / len(ev)))
    return rows


def shipped_weights() -> np.ndarray:
    return np.array([SHIPPED[p] for p in PARTS] + [0.0] * len(EXTRA))


def by(rows: Sequence[Row]) -> dict[tuple[str, int], list[Row]]:
    out: dict[tuple[str, int], list[Row]] = defaultdict(list)
    for r in rows:
        out[(r.sample, r.budget)].append(r)
    return out


def pooled(groups: dict[tuple[str, int], list[Row]], samples: Sequence[str], weights: np.ndarray) -> float:
    """Mean over the samples and budgets of each one's recall (every budget weighs alike)."""
    keys = [k for k in groups if k[0] in samples]
    return float(np.mean([recall(groups[k], weights) for k in keys])) if keys else 0.0


def coordinate_search(groups: dict[tuple[str, int], list[Row]], samples: Sequence[str]) -> np.ndarray:
    """The shipped weights, improved one part at a time over GRID on `samples`' pooled recall."""
    w = shipped_weights()
    best = pooled(groups, samples, w)
    for _ in range(SEARCH_PASSES):
        for part, grid in GRID.items():
            j = PARTS.index(part)
            for g in grid:
                trial = w.copy()
                trial[j] = g
                s = pooled(groups, samples, trial)
                if s > best + MIN_GAIN_POINTS:
                    best, w = s, trial
    return w


def choose(settings: dict[str, np.ndarray], groups: dict[tuple[str, int], list[Row]],
           samples: Sequence[str], held: str) -> str:
    """The setting with the best pooled recall over every sample but `held` (ties: the first)."""
    others = [s for s in samples if s != held]
    names = list(settings)
    scores = [pooled(groups, others, settings[n]) for n in names]
    return names[int(np.argmax(scores))]


def run(data: Path, budgets: Sequence[int], data_root: Path, *, sample_questions: int | None = None) -> dict[str, Any]:
    rows = capture(data, budgets, data_root, sample_questions=sample_questions)
    groups = by(rows)
    samples = sorted({r.sample for r in rows})
    base = shipped_weights()
    out: dict[str, Any] = {"data": str(data), "budgets": list(budgets), "contexts": len(rows), "samples": samples,
                           "planner": {}, "offline": {}, "folds": {}}
    for b in budgets:
        rs = [r for r in rows if r.budget == b]
        out["planner"][str(b)] = round(100.0 * sum(r.planner_hit for r in rs) / max(1, len(rs)), 2)
        out["offline"][str(b)] = round(recall(rs, base), 2)
    for held in samples:
        others = [s for s in samples if s != held]
        shipped = {b: round(recall(groups[(held, b)], base), 2) for b in budgets}  # every probe's "before"

        def held_out(weights: np.ndarray, held: str = held, shipped: dict[int, float] = shipped) -> dict[str, list[float]]:
            return {str(b): [shipped[b], round(recall(groups[(held, b)], weights), 2)] for b in budgets}

        fold: dict[str, Any] = {}
        fitted = coordinate_search(groups, others)
        fold["fusion"] = {"weights": dict(zip(PARTS, (float(x) for x in fitted[:len(PARTS)]), strict=True)),
                          "held_out": held_out(fitted)}
        for k, name in enumerate(EXTRA):
            settings = {}
            for wx in EXTRA_WEIGHTS:
                w = base.copy()
                w[len(PARTS) + k] = wx
                settings[f"{wx:g}"] = w
            pick = choose(settings, groups, samples, held)
            fold[name] = {"weight": float(pick), "held_out": held_out(settings[pick])}
        out["folds"][held] = fold
    return out


def table(result: dict[str, Any]) -> str:
    budgets = [str(b) for b in result["budgets"]]
    lines = [f"contexts {result['contexts']}; retrieved-block recall, planner / offline packer, shipped weights: "
             + ", ".join(f"{b}: {result['planner'][b]:.1f} / {result['offline'][b]:.1f}" for b in budgets),
             "held-out recall, shipped -> chosen on the other conversations (budgets " + ", ".join(budgets) + ")"]
    for held, fold in result["folds"].items():
        for probe in ("fusion", *EXTRA):
            f = fold[probe]
            what = (",".join(f"{k}={v:g}" for k, v in f["weights"].items()) if probe == "fusion"
                    else f"weight {f['weight']:g}")
            cells = "  ".join(f"{a:.1f}->{c:.1f}" for a, c in (f["held_out"][b] for b in budgets))
            lines.append(f"{held:10s} {probe:10s} {cells}   ({what})")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tiermem.evals.fusion_probe", description=__doc__.split("\n")[0])
    add_recall_args(ap, budgets="500,1000,2000,4000")
    args = ap.parse_args(argv)
    return report(args, lambda: run(args.data, args.budgets, args.data_root, sample_questions=args.sample_questions),
                  table)


if __name__ == "__main__":
    raise SystemExit(main())
