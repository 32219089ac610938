"""Would packing for coverage of different sessions raise multi-hop recall? An offline
probe (issue 19), the sibling of evals.fusion_probe and evals.ltr_probe.

    python -m tiermem.evals.div_probe --data ../shared/data/locomo-dev.json --data-root /tmp/div/data \\
        --cache /tmp/div/rows.pkl --json-out /tmp/div/div.json

The planner packs its retrieved block in score order; multi-hop evidence sits in two to
four sessions, so several turns of one session may crowd out the one turn of another
session the question also needs. fusion_probe.capture records every part of every turn's
score on the real path and the room the planner's block had; this probe repacks that
room offline three ways, each with one parameter chosen leave-one-conversation-out (on
the pooled recall over every budget of the other conversations, ties to the first =
off), and scored on the held-out one:

- `mmr_count`: greedy, a turn's shipped score less lambda * (turns already packed from
  its session);
- `mmr_count_gated`: the same, never when the query names a period (a date credit is
  set: the planner's own gate for its second round);
- `mmr_cos`: the same, less lambda * (its largest cosine to a turn already packed);
- `round_robin`: the best turn of each of the top-k sessions (sessions ranked by their
  best turn) first, then the rest by score;
- `decompose`: a question naming two entities joined by "and"/"or" ("What did A and B
  both ...") or two clauses joined by "and"/"than" is asked once per clause (what-if
  contexts, the same tap), and the clause lists are interleaved with the question's own
  for the first m rounds, then the rest by the question's score (every other question:
  unchanged).

Invariants: reads only (what-if contexts); nothing names a sample, a speaker, a topic or
a question; the split rules read capitalisation and a few function words only.
"""

from __future__ import annotations

import argparse
import os
import pickle
import re
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tiermem.evals.fusion_probe import (
    PACK_DEPTH,
    PARTS,
    STOP_ROOM_TOKENS,
    Row,
    capture,
    pack,
    pack_order,
    parts_of,
    shipped_weights,
    tapped,
)
from tiermem.evals.recall_rounds import add_recall_args, report

QUIET = Path("/work/exp/s30/QUIET")  # a timed CI run: wait while it exists
CATEGORIES = (1, 2, 3, 4, 5)
MMR_COUNT = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 1.0, 2.0)
MMR_COS = (0.0, 0.5, 1.0, 2.0, 3.0, 5.0)
ROUND_ROBIN = (0, 2, 3, 4, 5, 6, 8)
DECOMPOSE = (0, 1, 2, 3, 5, 10, 1000)  # rounds interleaved; 0: off
# two capitalised words joined by and/or: the question asks about each
# (or a name and a possessive's noun: "A and her kids")
_PAIR = re.compile(r"\b(?:both\s+)?([A-Z][\w'-]+)\s+(and|or)\s+([A-Z][\w'-]+|(?:her|his|their|my|our)\s+[a-z][\w'-]+)\b")
# two clauses: "and"/"than" followed by a question word, an auxiliary or a subject pronoun
_SPLIT = re.compile(r",?\s+\b(?:and|than)\s+(?=(?:what|when|where|who|whom|why|how|which|did|does|do|is|was|were|"
                    r"has|have|had|will|would|can|could|she|he|they|we|i)\b)", re.I)
_BOTH = re.compile(r"\s*\b(?:both|each|either)\b", re.I)


def clauses(question: str) -> list[str]:
    """The question's parts to ask separately; [] when it does not decompose."""
    q = question.strip()
    m = _PAIR.search(q[1:])  # the first word is capitalised anyway
    if m:
        a, b = m.group(1), m.group(3)
        s, e = m.start() + 1, m.end() + 1
        out = [_BOTH.sub("", q[:s] + x + q[e:]).strip() for x in (a, b)]
        return [c for c in out if c]
    parts = [p.strip(" ,?") for p in _SPLIT.split(q) if p.strip(" ,?")]
    if len(parts) >= 2 and all(len(p.split()) >= 2 for p in parts):
        return [p + "?" for p in parts[:3]]
    return []


def wait_quiet() -> None:
    while QUIET.exists():
        time.sleep(30)


def captured(data: Path, budgets: Sequence[int], data_root: Path, cache: Path | None,
             sample_questions: int | None) -> tuple[list[Row], dict[str, Any]]:
    key = {"data": str(data.resolve()), "mtime": data.stat().st_mtime, "budgets": list(budgets),
           "sample_questions": sample_questions}
    if cache is not None and cache.exists():
        saved = pickle.loads(cache.read_bytes())
        if saved.get("key") == key:
            return saved["rows"], saved["extra"]
    extra: dict[str, Any] = {"turns": {}, "category": {}, "clauses": {}}
    w9 = shipped_weights()[:len(PARTS)]

    def seen(prep: Any, table: Any, msgs: list[Any]) -> None:
        wait_quiet()
        label, memory, cid = prep.label, prep.memory, prep.ingested.conversation_id
        vec = np.asarray(table.vectors, dtype=np.float32) if table.vectors is not None else None
        extra["turns"][label] = {"positions": np.asarray(table.positions).copy(),
                                 "groups": np.asarray(table.groups).copy(), "vectors": vec}
        for q in prep.questions:
            extra["category"][(label, q.qa.question, tuple(q.evidence_positions))] = int(q.qa.category)
        rec: dict[str, Any] = {}
        with tapped(rec):
            for q in prep.questions:
                cs = clauses(q.qa.question)
                if not cs or (label, q.qa.question) in extra["clauses"]:
                    continue
                per_b: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
                for b in budgets:
                    got = []
                    for c in cs:
                        rec.clear()
                        memory.context(cid, c, budget=b, namespace=cid, record=False)
                        if "scores" in rec and "eligible" in rec:
                            got.append((np.asarray(rec["table"].positions).copy(), parts_of(rec) @ w9))
                    per_b[b] = got
                extra["clauses"][(label, q.qa.question)] = {"clauses": cs, "scores": per_b}

    rows = capture(data, budgets, data_root, sample_questions=sample_questions, on_sample=seen)
    for r in rows:  # the extra signal columns are not used here: keep the cache small
        r.parts = np.ascontiguousarray(r.parts[:, :len(PARTS)])
    if cache is not None:
        cache.write_bytes(pickle.dumps({"key": key, "rows": rows, "extra": extra}))
    return rows, extra


# --- packers: each returns the positions shown --------------------------------------

def base_score(row: Row) -> np.ndarray:
    return row.parts[:, :len(PARTS)] @ shipped_weights()[:len(PARTS)]


def base_order(row: Row) -> np.ndarray:
    idx = np.flatnonzero(row.eligible)
    return idx[np.argsort(-base_score(row)[idx], kind="stable")][:PACK_DEPTH]


def pack_mmr(row: Row, lam: float, groups: np.ndarray, vectors: np.ndarray | None, kind: str) -> set[int]:
    order = base_order(row)
    if lam == 0.0 or not len(order):
        return pack_order(row, order)
    score = base_score(row)[order]
    pen = np.zeros(len(order))
    alive = np.ones(len(order), dtype=bool)
    g = groups[order]
    v = vectors[order] if vectors is not None else None
    left, got = row.room, set()
    while alive.any():
        adj = np.where(alive, score - lam * pen, -np.inf)
        j = int(np.argmax(adj))
        alive[j] = False
        i = int(order[j])
        if row.cost[i] <= left:
            left -= int(row.cost[i])
            got.add(int(row.positions[i]))
            if kind == "count":
                pen[g == g[j]] += 1.0
            elif v is not None:
                pen = np.maximum(pen, v @ v[j])
        if left < STOP_ROOM_TOKENS:
            break
    return got


def pack_round_robin(row: Row, k: int, groups: np.ndarray) -> set[int]:
    order = base_order(row)
    if k == 0:
        return pack_order(row, order)
    first: list[int] = []
    seen_g: set[int] = set()
    for i in order:  # best first: a session's first turn met is its best
        gi = int(groups[i])
        if gi not in seen_g:
            seen_g.add(gi)
            first.append(int(i))
            if len(first) >= k:
                break
    return pack_order(row, first + [int(i) for i in order])


def pack_decompose(row: Row, m: int, clause_scores: list[tuple[np.ndarray, np.ndarray]] | None) -> set[int]:
    order = base_order(row)
    if m == 0 or not clause_scores:
        return pack_order(row, order)
    idx = np.flatnonzero(row.eligible)
    lists = [list(order)]
    for pos, total in clause_scores:
        at = np.searchsorted(pos, row.positions)
        at = np.minimum(at, len(pos) - 1)
        s = np.where(pos[at] == row.positions, total[at], -np.inf)
        lists.append(list(idx[np.argsort(-s[idx], kind="stable")][:PACK_DEPTH]))
    merged: list[int] = []
    for r in range(min(m, PACK_DEPTH)):
        for lst in lists:
            if r < len(lst):
                merged.append(int(lst[r]))
    return pack_order(row, merged + [int(i) for i in order])


# --- leave-one-out -------------------------------------------------------------------

def hits_of(rows: Sequence[Row], extra: dict[str, Any]) -> dict[str, dict[str, list[float]]]:
    """probe -> setting -> per-row recall (0..1), in rows' order."""
    aligned: dict[str, tuple[np.ndarray, np.ndarray | None]] = {}
    out: dict[str, dict[str, list[float]]] = {"mmr_count": {}, "mmr_count_gated": {}, "mmr_cos": {},
                                              "round_robin": {}, "decompose": {}}
    for r in rows:
        if r.sample not in aligned:
            t = extra["turns"][r.sample]
            at = np.searchsorted(t["positions"], r.positions)
            if not np.array_equal(t["positions"][np.minimum(at, len(t["positions"]) - 1)], r.positions):
                raise ValueError("a row's turns are not its sample's")
            aligned[r.sample] = (t["groups"][at], None if t["vectors"] is None else t["vectors"][at])

    def hit(r: Row, shown: set[int]) -> float:
        return len(set(r.evidence) & shown) / len(r.evidence)

    checks = 0
    for r in rows:
        groups, vectors = aligned[r.sample]
        if len(groups) != len(r.positions):  # a later snapshot: realign per row
            t = extra["turns"][r.sample]
            at = np.searchsorted(t["positions"], r.positions)
            groups = t["groups"][at]
            vectors = None if t["vectors"] is None else t["vectors"][at]
        ref = pack(r, shipped_weights()[:r.parts.shape[1]])
        if pack_order(r, base_order(r)) != ref:
            checks += 1
        for lam in MMR_COUNT:
            out["mmr_count"].setdefault(f"{lam:g}", []).append(hit(r, pack_mmr(r, lam, groups, vectors, "count")))
        # gated as the planner's hop is: never when the query names a period (a date credit is set)
        dated = bool(np.any(r.parts[:, PARTS.index("date")] != 0))
        for lam in MMR_COUNT:
            out["mmr_count_gated"].setdefault(f"{lam:g}", []).append(
                hit(r, pack_mmr(r, 0.0 if dated else lam, groups, vectors, "count")))
        for lam in MMR_COS:
            out["mmr_cos"].setdefault(f"{lam:g}", []).append(hit(r, pack_mmr(r, lam, groups, vectors, "cos")))
        for k in ROUND_ROBIN:
            out["round_robin"].setdefault(str(k), []).append(hit(r, pack_round_robin(r, k, groups)))
        cl = extra["clauses"].get((r.sample, r.question))
        cs = cl["scores"].get(r.budget) if cl else None
        for m in DECOMPOSE:
            out["decompose"].setdefault(str(m), []).append(hit(r, pack_decompose(r, m, cs)))
    if checks:
        raise AssertionError(f"pack_order differs from fusion_probe.pack on {checks} rows")
    return out


def loo(rows: Sequence[Row], extra: dict[str, Any], budgets: Sequence[int]) -> dict[str, Any]:
    samples = sorted({r.sample for r in rows})
    cat = [extra["category"].get((r.sample, r.question, tuple(r.evidence)), 0) for r in rows]
    hits = hits_of(rows, extra)
    keys: dict[tuple[str, int], list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        keys[(r.sample, r.budget)].append(i)

    def pooled_over(h: list[float], ss: Sequence[str]) -> float:  # fusion_probe.pooled's mean
        return float(np.mean([np.mean([h[i] for i in keys[(s, b)]]) for s in ss for b in budgets if keys[(s, b)]]))

    def pct(ix: list[int], h: list[float]) -> float | None:
        return round(100.0 * float(np.mean([h[i] for i in ix])), 2) if ix else None

    res: dict[str, Any] = {"samples": samples, "probes": {}}
    off = {"mmr_count": "0", "mmr_count_gated": "0", "mmr_cos": "0", "round_robin": "0", "decompose": "0"}
    for probe, settings in hits.items():
        base = settings[off[probe]]
        chosen_rows = [0.0] * len(rows)
        folds: dict[str, Any] = {}
        for held in samples:
            others = [s for s in samples if s != held]
            names = list(settings)
            scores = [pooled_over(settings[n], others) for n in names]
            pick = names[int(np.argmax(scores))]
            mine = [i for i, r in enumerate(rows) if r.sample == held]
            for i in mine:
                chosen_rows[i] = settings[pick][i]
            fold: dict[str, Any] = {"chosen": pick, "train_pooled": dict(zip(names, (round(s, 2) for s in scores), strict=True)),
                                    "by_budget": {}, "by_category": {}}
            for b in budgets:
                ix = [i for i in mine if rows[i].budget == b]
                fold["by_budget"][str(b)] = [pct(ix, base), pct(ix, settings[pick])]
                fold["by_category"][str(b)] = {str(c): [pct([i for i in ix if cat[i] == c], base),
                                                        pct([i for i in ix if cat[i] == c], settings[pick])]
                                               for c in CATEGORIES}
            folds[held] = fold
        pooled_b = {}
        pooled_c = {}
        for b in budgets:
            ix = [i for i, r in enumerate(rows) if r.budget == b]
            pooled_b[str(b)] = [pct(ix, base), pct(ix, chosen_rows)]
            pooled_c[str(b)] = {str(c): [pct([i for i in ix if cat[i] == c], base),
                                         pct([i for i in ix if cat[i] == c], chosen_rows)] for c in CATEGORIES}
        every = {n: {str(b): pct([i for i, r in enumerate(rows) if r.budget == b], h) for b in budgets}
                 for n, h in settings.items()}
        res["probes"][probe] = {"folds": folds, "pooled": pooled_b, "pooled_by_category": pooled_c,
                                "every_setting_all_samples": every}
    n_dec = len({(r.sample, r.question) for r in rows if (r.sample, r.question) in extra["clauses"]})
    res["decomposed_questions"] = n_dec
    counts: dict[int, int] = defaultdict(int)
    for (s, q) in {(r.sample, r.question) for r in rows if (r.sample, r.question) in extra["clauses"]}:
        c = next((cat[i] for i, r in enumerate(rows) if r.sample == s and r.question == q), 0)
        counts[c] += 1
    res["decomposed_by_category"] = {str(k): v for k, v in sorted(counts.items())}
    return res


def run(data: Path, budgets: Sequence[int], data_root: Path, *, sample_questions: int | None,
        cache: Path | None) -> dict[str, Any]:
    rows, extra = captured(data, budgets, data_root, cache, sample_questions)
    out = loo(rows, extra, budgets)
    out.update({"data": str(data), "budgets": list(budgets), "contexts": len(rows),
                "planner": {str(b): round(100.0 * float(np.mean([r.planner_hit for r in rows if r.budget == b] or [0.0])), 2)
                            for b in budgets}})
    return out


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def table(result: dict[str, Any]) -> str:
    budgets = [str(b) for b in result["budgets"]]
    lines = [f"contexts {result['contexts']}; planner retrieved-block recall "
             + ", ".join(f"{b}: {result['planner'][b]:.1f}" for b in budgets),
             f"decomposed questions {result['decomposed_questions']} by category {result['decomposed_by_category']}"]
    for probe, p in result["probes"].items():
        lines.append(f"== {probe}: held-out recall, off -> chosen (budgets {', '.join(budgets)}); multi-hop / temporal")
        for held, f in p["folds"].items():
            cells = "  ".join(f"{a:.1f}->{c:.1f} ({c - a:+.1f})" for a, c in (f["by_budget"][b] for b in budgets))
            mh = " ".join(f"{_f(f['by_category'][b]['1'][0])}->{_f(f['by_category'][b]['1'][1])}" for b in budgets)
            tp = " ".join(f"{_f(f['by_category'][b]['2'][0])}->{_f(f['by_category'][b]['2'][1])}" for b in budgets)
            lines.append(f"{held:8s} chose {f['chosen']:>5s}  {cells}\n         mh {mh}\n         temporal {tp}")
        cells = "  ".join(f"{a:.1f}->{c:.1f} ({c - a:+.1f})" for a, c in (p["pooled"][b] for b in budgets))
        mh = " ".join(f"{_f(p['pooled_by_category'][b]['1'][0])}->{_f(p['pooled_by_category'][b]['1'][1])}" for b in budgets)
        lines.append(f"pooled               {cells}\n         mh {mh}")
        lines.append("  every setting, all samples: " + "; ".join(
            f"{n}: " + "/".join(_f(v) for v in e.values()) for n, e in p["every_setting_all_samples"].items()))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_recall_args(ap, budgets="500,1000,2000,4000")
    ap.add_argument("--cache", type=Path, default=None)
    args = ap.parse_args(argv)
    os.nice(5)
    return report(args, lambda: run(args.data, args.budgets, args.data_root, sample_questions=args.sample_questions,
                                    cache=args.cache), table)


if __name__ == "__main__":
    import sys
    sys.path.insert(0, str(Path(__file__).parent))
    from div_probe import main as _main  # the module's own classes go into the pickle
    raise SystemExit(_main())
