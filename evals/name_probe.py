"""The named participant's turns: three probes of issue 19's biggest miss class (nothing shipped).

    python -m tiermem.evals.name_probe --data ../shared/data/locomo-dev.json \\
        --budgets 500,2000 --data-root /tmp/np/data --modes shipped,one,all --json-out names.json

Of the open-domain and multi-hop evidence turns the planner misses at 2,000 tokens on three
dev conversations, most are the own turns of the one participant the question names (a
first-person statement: what they did, like, plan), ranked 40-400 by the shipped score;
the question's words are not theirs ("activities" against "went swimming"). Each mode
asks every question with evidence at every budget as a what-if context (`record=False`,
as recall_rounds), one change at a time:
- `shipped`: the planner as it ships (the base every fold is scored against);
- `one` / `all`: the conversation's keyword search gets the query without the one named
  participant's name (`one`: when exactly one is named, as planner.speakers) or without
  every name (`all`); the embedding has no names already, and bm25 matches a name mostly
  in the *other* participant's turns that address the named one ("Hey Jo! ..."). The
  Memory's own Candidates object has its `lexical` wrapped (an instance attribute);
- `broad-T-E`: the named participant's boost (planner.speakers.SPEAKER_BOOST) raised by E
  when the query's best cosine to any turn is below T (a broad question: nothing in the
  conversation says what it asks; adversarial questions, which name the wrong participant
  on purpose, are mostly specific);
- `modal-E`: the same boost raised by E when the question asks what is likely
  (MODAL_WORDS: "would", "might", ...; English function words).
The boost modes wrap planner.candidates' module globals `score_turns` and `speaker_boost`
for the run, restored on exit. A query that would be left with no word keeps its words.

Leave-one-conversation-out: for each sample, the mode with the best recall pooled over
the other samples' questions and every budget (one setting for all budgets; ties go to the
base), scored on the held-out sample against `shipped`, by budget and category. Nothing
here names a sample, a speaker, a topic or a question.
"""

from __future__ import annotations

import argparse
import contextlib
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import tiermem.planner.candidates as C
from tiermem.evals.baselines import INCLUDED_FIDELITIES, mean
from tiermem.evals.locomo import CATEGORIES
from tiermem.evals.recall_rounds import add_recall_args, load_checked, prepared, report
from tiermem.planner.candidates import without_names
from tiermem.planner.speakers import named_speaker

MODES = ("shipped", "one", "all")  # the first is the base every fold is scored against
# `broad-T-E`: the named participant's boost raised by E when the query's best cosine to any
# turn is below T (a broad question: nothing in the conversation says what it asks)
BROAD = "broad"
# `modal-E`: the named participant's boost raised by E when the question asks what is
# likely of them (a modal or a word of likelihood: English function words, no data's)
MODAL = "modal"
MODAL_WORDS = frozenset(["would", "might", "could", "likely", "probably", "may"])
_WORD = re.compile(r"[a-z']+")
Rec = tuple[str, int, float]  # sample, category, recall of one question


def broad_mode(mode: str) -> tuple[float, float] | None:
    """(threshold, extra boost) of a `broad-T-E` mode (a `modal-E` mode: threshold -1),
    else None."""
    head, _sep, rest = mode.partition("-")
    if head == MODAL:
        return -1.0, float(rest)
    if head != BROAD:
        return None
    t, _sep, e = rest.partition("-")
    return float(t), float(e)


def valid_mode(mode: str) -> bool:
    try:
        return mode in MODES or broad_mode(mode) is not None
    except ValueError:
        return False


def keyword_query(query: str, table: Any, mode: str) -> str:
    """The text the conversation's keyword search gets for `query` in `mode`."""
    if mode == "shipped" or broad_mode(mode) is not None or not query:
        return query
    if mode == "one":
        who = named_speaker(table, query)
        if who is None:
            return query
        return without_names(query, frozenset([table.speaker_names[who]]))
    if mode == "all":
        return without_names(query, table.names)
    raise ValueError(f"mode {mode!r}: the modes are {list(MODES)}")


def broad_extra(cosine: np.ndarray | None, threshold: float, extra: float) -> float:
    """The extra boost for a query whose cosines to the turns are `cosine`: `extra` when
    the best is below `threshold` (no vector: no extra)."""
    if cosine is None or not cosine.size or np.all(np.isnan(cosine)):
        return 0.0
    return extra if float(np.nanmax(cosine)) < threshold else 0.0


def asks_likely(query: str) -> bool:
    """Whether the question asks what is likely (MODAL_WORDS)."""
    return any(w in MODAL_WORDS for w in _WORD.findall(query.lower()))


@contextlib.contextmanager
def broad(mode: str) -> Iterator[None]:
    """planner.candidates' `score_turns` and `speaker_boost` (module globals, restored on
    exit) wrapped for a `broad-T-E` mode: the boost is raised by E for a broad query."""
    setting = broad_mode(mode)
    if setting is None:
        yield
        return
    threshold, extra = setting
    score_turns, boost = C.score_turns, C.speaker_boost
    seen: dict[str, Any] = {}

    def _score_turns(*a: Any, **k: Any) -> Any:
        seen["scores"] = out = score_turns(*a, **k)
        return out

    def _boost(table: Any, query: str) -> np.ndarray:
        out = boost(table, query)
        scores = seen.pop("scores", None)
        if out.any() and threshold < 0:  # modal
            out = out + (out > 0) * (extra if asks_likely(query) else 0.0)
        elif out.any() and scores is not None:
            out = out + (out > 0) * broad_extra(scores.cosine, threshold, extra)
        return out

    C.score_turns, C.speaker_boost = _score_turns, _boost
    try:
        yield
    finally:
        C.score_turns, C.speaker_boost = score_turns, boost


@contextlib.contextmanager
def keywords(cands: Any, mode: str) -> Iterator[None]:
    """`cands.lexical` (one Memory's Candidates) searching `keyword_query` for the block."""
    lexical = cands.lexical

    def _lexical(conv: str, namespace: str, query: str | None, namespace_recall: bool, table: Any) -> Any:
        return lexical(conv, namespace, keyword_query(query, table, mode) if query else query,
                       namespace_recall, table)

    cands.lexical = _lexical
    try:
        yield
    finally:
        del cands.lexical  # the class's method again


def run(data: Path, budgets: Sequence[int], *, data_root: Path, sample_questions: int | None = None,
        modes: Sequence[str] = MODES) -> dict[str, Any]:
    recs: dict[str, dict[str, list[Rec]]] = {m: {str(b): [] for b in budgets} for m in modes}
    samples = load_checked(data)  # refused before any data dir is made
    for prep in prepared(samples, data_root, hot=True, sample_questions=sample_questions):
        memory, cid = prep.memory, prep.ingested.conversation_id
        for m in modes:
            with keywords(memory.planner.candidates, m), broad(m):
                for q in prep.questions:
                    for b in budgets:
                        ctx = memory.context(cid, q.qa.question, budget=b, namespace=cid, record=False)
                        got = {p for it in ctx.plan.items if it.conversation_id == cid
                               and it.fidelity in INCLUDED_FIDELITIES for p in it.positions}
                        hit = sum(1 for p in q.evidence_positions if p in got)
                        recs[m][str(b)].append((prep.label, q.qa.category, hit / len(q.evidence_positions)))
    return {"data": str(data), "budgets": list(budgets), "modes": list(modes),
            "records": recs, "folds": folds(recs, list(modes), [str(b) for b in budgets])}


def _mean(xs: Sequence[float]) -> float | None:
    m = mean(list(xs))
    return None if m is None else round(100 * m, 2)


def folds(recs: dict[str, dict[str, list[Rec]]], modes: list[str], budgets: list[str]) -> dict[str, Any]:
    """Per held-out sample: the mode chosen on the others (pooled over every budget; ties go
    to the base), and its held-out recall against the base's, by budget and category."""
    base = modes[0]
    samples = sorted({s for s, _c, _x in recs[base][budgets[0]]})
    out: dict[str, Any] = {}
    for held in samples:
        def on_others(m: str, held: str = held) -> tuple[float, bool]:
            xs = [x for b in budgets for s, _c, x in recs[m][b] if s != held]
            return (sum(xs) / len(xs) if xs else 0.0), m == base

        chosen = max(modes, key=on_others)
        out[held] = {"chosen": chosen, "budgets": {b: {
            who: {"all": _mean([x for s, _c, x in recs[m][b] if s == held]),
                  **{str(c): _mean([x for s, cat, x in recs[m][b] if s == held and cat == c]) for c in CATEGORIES}}
            for who, m in (("chosen", chosen), ("base", base))} for b in budgets}}
    return out


def table(result: dict[str, Any]) -> str:
    lines = []
    budgets = [str(b) for b in result["budgets"]]
    for m in result["modes"]:
        for b in budgets:
            rs = result["records"][m][b]
            cats = " ".join(f"c{c} {_mean([x for _s, cat, x in rs if cat == c])}" for c in CATEGORIES)
            lines.append(f"{m:<8} {b:>5}: {_mean([x for _s, _c, x in rs])}  {cats}")
    for held, f in result["folds"].items():
        for b in budgets:
            ch, ba = f["budgets"][b]["chosen"], f["budgets"][b]["base"]
            lines.append(f"held {held} chose {f['chosen']:<8} {b:>5}: {ba['all']} -> {ch['all']}  "
                         f"temporal {ba['2']} -> {ch['2']}  multi-hop {ba['1']} -> {ch['1']}  "
                         f"open-domain {ba['3']} -> {ch['3']}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tiermem.evals.name_probe", description=__doc__.split("\n")[0])
    add_recall_args(ap, budgets="500,2000")
    ap.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {list(MODES)}; the first is the base")
    args = ap.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in modes if not valid_mode(m)]
    if bad or not modes:
        ap.error(f"--modes: {bad[0] if bad else '(none)'!r} is not one of {list(MODES)}")
    return report(args, lambda: run(args.data, args.budgets, data_root=args.data_root,
                                    sample_questions=args.sample_questions, modes=modes), table)


if __name__ == "__main__":
    raise SystemExit(main())
