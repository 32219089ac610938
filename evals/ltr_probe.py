"""Would a learned, non-linear combiner of the planner's score parts rank the evidence
higher? An offline probe (issue 19), the sibling of evals.fusion_probe.

    python -m tiermem.evals.ltr_probe --data ../shared/data/locomo-dev.json \\
        --data-root /tmp/rr/data --cache /tmp/ltr_rows.pkl --json-out ltr.json

fusion_probe found that no LINEAR setting of the nine score parts' weights gains held
out. This probe asks whether a per-turn relevance model does: one that sees the parts
together with cheap per-turn facts the planner already has (the turn's log token length,
its ingest label, whether its speaker is the one the query names, whether it ends with
'?', whether it carries an [image: ...] caption, its rank by each main part, its
neighbours' and its session's best score, the share of the query's idf-weighted words
it holds) and may weigh them by their interactions. Models, each fitted per fold on the
(question, turn, is-evidence) rows of every sample but the held-out one and scored on
the held-out one:

- `lr_parts`: logistic regression on the nine parts alone (standardized): the linear
  reference on the same footing as the rest;
- `lr`: the same on every feature;
- `lr_pairs`: the same plus the pairwise products of the main parts;
- `hgb`: a small gradient-boosted tree model (depth 3, 100 iterations, pointwise log
  loss), meant as the ceiling: on the dev conversations it ranks below the shipped score
  even on the conversations it was fitted on (README, Design notes).

Each model reorders the shipped score's best RERANK_DEPTH eligible turns of a question
(the planner's candidates are its best 400), ties broken by the shipped score, and the
held-out sample's retrieved block is packed again by fusion_probe's offline packer (`pack`
with scores) into the room the planner's block had. The shipped weights are scored the
same way in the same run. Nothing is chosen on the held-out sample: the models have no
setting tuned at all.

Invariants: reads only (fusion_probe.capture: what-if contexts); the captured rows are
cached to a pickle (`--cache`) so that the models rerun without the four to six minutes of
capture; nothing here names a sample, a speaker, a topic or a question: every feature is
computed from the conversation's own turns and the planner's own parts.
"""

from __future__ import annotations

import argparse
import math
import pickle
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tiermem.evals.fusion_probe import _IMAGE, _WORD, PACK_DEPTH, PARTS, Row, capture, pack, shipped_weights
from tiermem.evals.recall_rounds import add_recall_args, report
from tiermem.tiers.models import message_text
from tiermem.tiers.search import STOPWORDS

RERANK_DEPTH = PACK_DEPTH  # the shipped score's best eligible turns a model reorders
INTENTS = ("question", "statement", "chitchat")  # ingest labels given a column each (others: none set)
# the parts whose rank, and whose pairwise products (lr_pairs), are features
MAIN_PARTS = ("cosine", "bm25", "neighbour", "episode", "speaker", "rounds")
RANKED = ("cosine", "bm25", "neighbour", "episode")
FEATURES = (*PARTS, "total", "gap", *(f"rank_{p}" for p in (*RANKED, "total")), "log_tokens",
            *(f"intent_{i}" for i in INTENTS), "named", "query_names", "ends_ask", "image",
            "neighbour_best", "session_best", "session_gap", "coverage")
HGB_DEPTH = 3
HGB_ITERATIONS = 100
LR_C = 1.0  # sklearn's default regularization: nothing is tuned on any fold
LR_MAX_ITER = 500
PROBE_SEED = 0

# (training features, labels) -> a scorer of feature rows (higher: more likely evidence)
Fitter = Callable[[np.ndarray, np.ndarray], Callable[[np.ndarray], np.ndarray]]


@dataclass
class Turns:
    """One sample's per-turn facts that do not depend on the question."""

    positions: np.ndarray
    log_tokens: np.ndarray
    groups: np.ndarray  # episode (session) id
    intents: np.ndarray  # (turns, len(INTENTS)) 0/1
    ends_ask: np.ndarray  # bool: the text ends with '?'
    image: np.ndarray  # bool: an [image: ...] caption
    words: list[frozenset[str]]
    idf: dict[str, float]
    names: frozenset[str]  # the speakers' names, lower case (not query words for coverage)

    @classmethod
    def of(cls, table: Any, texts: dict[int, str], intents: dict[int, str | None]) -> Turns:
        positions = np.asarray(table.positions).copy()
        body = [texts.get(int(p), "") for p in positions]
        names = frozenset(n.lower() for n in table.names)
        words = [frozenset(w for w in _WORD.findall(t.lower()) if w not in STOPWORDS and w not in names)
                 for t in body]
        df: dict[str, int] = {}
        for ws in words:
            for w in ws:
                df[w] = df.get(w, 0) + 1
        n = len(body)
        idf = {w: math.log(1 + (n - d + 0.5) / (d + 0.5)) for w, d in df.items()}
        lab = np.array([[float(intents.get(int(p)) == i) for i in INTENTS] for p in positions]).reshape(n, len(INTENTS))
        return cls(positions, np.log1p(np.asarray(table.tokens, dtype=float)), np.asarray(table.groups).copy(), lab,
                   np.array([t.rstrip().endswith("?") for t in body], dtype=bool),
                   np.array([bool(_IMAGE.search(t)) for t in body], dtype=bool), words, idf, names)


def _rank(x: np.ndarray) -> np.ndarray:
    """log(1 + each entry's rank, best first; ties share the first's order)."""
    r = np.empty(len(x))
    r[np.argsort(-x, kind="stable")] = np.arange(len(x))
    return np.log1p(r)


def candidates_of(row: Row) -> np.ndarray:
    """Indexes of the shipped score's best RERANK_DEPTH eligible turns, best first."""
    total = row.parts @ shipped_weights()
    idx = np.flatnonzero(row.eligible)
    return idx[np.argsort(-total[idx], kind="stable")][:RERANK_DEPTH]


def features(row: Row, turns: Turns) -> np.ndarray:
    """(turns of `row`, len(FEATURES)): every turn's features for `row`'s question."""
    n = len(row.positions)
    at = np.searchsorted(turns.positions, row.positions)
    if not np.array_equal(turns.positions[np.minimum(at, len(turns.positions) - 1)], row.positions):
        raise ValueError("a row's turns are not its sample's")
    parts = row.parts[:, :len(PARTS)]
    total = row.parts @ shipped_weights()
    top = float(total[row.eligible].max()) if row.eligible.any() else float(total.max())
    ranks = [_rank(parts[:, PARTS.index(p)]) for p in RANKED] + [_rank(total)]
    named = parts[:, PARTS.index("speaker")] > 0  # the speaker part is set on the named speaker's turns only
    left = np.concatenate([[-np.inf], total[:-1]])
    right = np.concatenate([total[1:], [-np.inf]])
    neighbour_best = np.maximum(left, right)
    neighbour_best[~np.isfinite(neighbour_best)] = total.min() if n else 0.0
    groups = turns.groups[at]
    best: dict[int, float] = {}
    for g, t in zip(groups.tolist(), total.tolist(), strict=True):
        best[g] = max(best.get(g, -math.inf), t)
    session_best = np.array([best[g] for g in groups.tolist()])
    qwords = {w for w in _WORD.findall(row.question.lower()) if w not in STOPWORDS and w not in turns.names}
    top_idf = math.log(1 + (len(turns.positions) + 0.5) / 0.5)  # a word no turn has
    weight = {w: turns.idf.get(w, top_idf) for w in qwords}
    whole = sum(weight.values())
    coverage = np.array([sum(v for w, v in weight.items() if w in turns.words[i]) / whole if whole else 0.0
                         for i in at.tolist()])
    cols = [*parts.T, total, total - top, *ranks, turns.log_tokens[at], *turns.intents[at].T,
            named.astype(float), np.full(n, float(named.any())), turns.ends_ask[at].astype(float),
            turns.image[at].astype(float), neighbour_best, session_best, total - session_best, coverage]
    return np.stack(cols, 1)


def with_pairs(x: np.ndarray) -> np.ndarray:
    """`x` and the pairwise products of its MAIN_PARTS columns."""
    j = [FEATURES.index(p) for p in MAIN_PARTS]
    prods = [x[:, a] * x[:, b] for k, a in enumerate(j) for b in j[k + 1:]]
    return np.concatenate([x, np.stack(prods, 1)], 1)


def fit_lr(columns: Sequence[int] | None = None, pairs: bool = False) -> Fitter:
    """Logistic regression on standardized inputs: `columns` of FEATURES (all when None),
    with the main parts' pairwise products when `pairs`."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    def prep(x: np.ndarray) -> np.ndarray:
        x = with_pairs(x) if pairs else x
        return x if columns is None else x[:, list(columns)]

    def fit(x: np.ndarray, y: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
        model = make_pipeline(StandardScaler(), LogisticRegression(C=LR_C, max_iter=LR_MAX_ITER))
        model.fit(prep(x), y)
        return lambda z: np.asarray(model.decision_function(prep(z)), dtype=float)
    return fit


def fit_hgb(x: np.ndarray, y: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    from sklearn.ensemble import HistGradientBoostingClassifier
    model = HistGradientBoostingClassifier(max_depth=HGB_DEPTH, max_iter=HGB_ITERATIONS, early_stopping=False,
                                           random_state=PROBE_SEED)
    model.fit(x, y)
    return lambda z: np.asarray(model.decision_function(z), dtype=float)


def models() -> dict[str, Fitter]:
    return {"lr_parts": fit_lr(columns=range(len(PARTS))), "lr": fit_lr(), "lr_pairs": fit_lr(pairs=True),
            "hgb": fit_hgb}


@dataclass
class Prepared:
    """A row's candidates and their features, computed once for every fold."""

    row: Row
    cand: np.ndarray  # indexes into the row's turns
    x: np.ndarray  # (len(cand), len(FEATURES))
    y: np.ndarray  # bool: the candidate is evidence


def prepare(rows: Sequence[Row], turns: dict[str, Turns]) -> list[Prepared]:
    out = []
    for r in rows:
        cand = candidates_of(r)
        out.append(Prepared(r, cand, features(r, turns[r.sample])[cand], np.isin(r.positions[cand], r.evidence)))
    return out


def training(prepared: Sequence[Prepared], samples: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """The (features, is-evidence) rows of `samples`' questions, every budget."""
    keep = [p for p in prepared if p.row.sample in samples]
    if not keep:
        return np.zeros((0, len(FEATURES))), np.zeros(0, dtype=bool)
    return np.concatenate([p.x for p in keep]), np.concatenate([p.y for p in keep])


def scored(p: Prepared, scorer: Callable[[np.ndarray], np.ndarray]) -> set[int]:
    """What the offline packer shows with the model's scores (turns past the candidates: never)."""
    s = np.full(len(p.row.positions), -np.inf)
    if len(p.cand):
        s[p.cand] = scorer(p.x)
    return pack(p.row, scores=s)


def hit(row: Row, shown: set[int]) -> float:
    return len(set(row.evidence) & shown) / len(row.evidence)


def leave_one_out(prepared: Sequence[Prepared], budgets: Sequence[int], fitters: dict[str, Fitter]) -> dict[str, Any]:
    """Per held-out sample: each model fitted on the other samples' rows, and the held-out
    recall (%) per budget of the shipped weights and of each model; `pooled`: every held-out
    question alike (the standard eval's mean)."""
    samples = sorted({p.row.sample for p in prepared})
    base = shipped_weights()
    names = ["shipped", *fitters]
    hits: dict[str, dict[str, dict[int, list[float]]]] = {s: {m: {b: [] for b in budgets} for m in names}
                                                          for s in samples}
    fit_s: dict[str, dict[str, float]] = {s: {} for s in samples}
    for held in samples:
        others = [s for s in samples if s != held]
        mine = [p for p in prepared if p.row.sample == held]
        for p in mine:
            hits[held]["shipped"][p.row.budget].append(hit(p.row, pack(p.row, base)))
        x, y = training(prepared, others)
        for name, fit in fitters.items():
            t0 = time.perf_counter()
            scorer = fit(x, y)
            fit_s[held][name] = round(time.perf_counter() - t0, 1)
            for p in mine:
                hits[held][name][p.row.budget].append(hit(p.row, scored(p, scorer)))

    def pct(v: list[float]) -> float:
        return round(100.0 * sum(v) / len(v), 2) if v else 0.0
    folds = {s: {m: {str(b): pct(hits[s][m][b]) for b in budgets} for m in names} for s in samples}
    pooled = {m: {str(b): pct([h for s in samples for h in hits[s][m][b]]) for b in budgets} for m in names}
    return {"samples": samples, "models": names, "folds": folds, "pooled": pooled, "fit_seconds": fit_s}


def captured(data: Path, budgets: Sequence[int], data_root: Path, *, sample_questions: int | None,
             cache: Path | None) -> tuple[list[Row], dict[str, Turns]]:
    """fusion_probe.capture's rows and each sample's Turns; from `cache` when it holds this
    very capture (data file, budgets, questions), else captured and written there."""
    key = {"data": str(data.resolve()), "mtime": data.stat().st_mtime, "budgets": list(budgets),
           "sample_questions": sample_questions}
    if cache is not None and cache.exists():
        try:
            saved = pickle.loads(cache.read_bytes())  # our own file, written below
        except (pickle.UnpicklingError, AttributeError, EOFError):  # cut short, or another version's classes
            saved = {}
        if saved.get("key") == key:
            return saved["rows"], saved["turns"]
    turns: dict[str, Turns] = {}

    def seen(prep: Any, table: Any, msgs: list[Any]) -> None:
        cid = prep.ingested.conversation_id
        rows = prep.memory.cold.turns_at(cid, table.positions.tolist())
        turns[prep.label] = Turns.of(table, {m.position: message_text(m.body) for m in msgs},
                                     {r.position: r.intent for r in rows})

    rows = capture(data, budgets, data_root, sample_questions=sample_questions, on_sample=seen)
    if cache is not None:
        cache.write_bytes(pickle.dumps({"key": key, "rows": rows, "turns": turns}))
    return rows, turns


def run(data: Path, budgets: Sequence[int], data_root: Path, *, sample_questions: int | None = None,
        cache: Path | None = None, fitters: dict[str, Fitter] | None = None) -> dict[str, Any]:
    rows, turns = captured(data, budgets, data_root, sample_questions=sample_questions, cache=cache)
    out = leave_one_out(prepare(rows, turns), budgets, models() if fitters is None else fitters)
    # the planner's own retrieved-block recall beside the offline packer's with the shipped
    # weights: the packer's error is on the table next to any gain
    out.update({"data": str(data), "budgets": list(budgets), "contexts": len(rows),
                "planner": {str(b): round(100.0 * float(np.mean([r.planner_hit for r in rows if r.budget == b] or [0.0])), 2)
                            for b in budgets},
                "features": list(FEATURES), "rerank_depth": RERANK_DEPTH})
    return out


def table(result: dict[str, Any]) -> str:
    budgets = [str(b) for b in result["budgets"]]
    models = [m for m in result["models"] if m != "shipped"]
    lines = [f"contexts {result['contexts']}; retrieved-block recall, planner / offline packer, shipped weights: "
             + ", ".join(f"{b}: {result['planner'][b]:.1f} / {result['pooled']['shipped'][b]:.1f}" for b in budgets),
             f"held-out recall, shipped -> model (budgets {', '.join(budgets)})"]
    for held in [*result["samples"], "pooled"]:
        cells = result["pooled"] if held == "pooled" else result["folds"][held]
        for m in models:
            row = "  ".join(f"{cells['shipped'][b]:.1f}->{cells[m][b]:.1f} ({cells[m][b] - cells['shipped'][b]:+.1f})"
                            for b in budgets)
            lines.append(f"{held:10s} {m:9s} {row}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tiermem.evals.ltr_probe", description=__doc__.split("\n")[0])
    add_recall_args(ap, budgets="500,1000,2000,4000")
    ap.add_argument("--cache", type=Path, default=None,
                    help="a pickle of the captured rows: read when it holds this capture, else written")
    args = ap.parse_args(argv)
    return report(args, lambda: run(args.data, args.budgets, args.data_root, sample_questions=args.sample_questions,
                                    cache=args.cache), table)


if __name__ == "__main__":
    # the module's own classes, not __main__'s, go into the cache: it then loads from any caller
    from tiermem.evals.ltr_probe import main as _main
    raise SystemExit(_main())
