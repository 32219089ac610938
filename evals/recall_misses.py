"""Where LoCoMo evidence goes missing: for every question with evidence and every budget,
each evidence turn is classified by what the planner did with it, pooled per category.

    python -m tiermem.evals.recall_misses --data ../shared/data/locomo-dev.json \\
        --budgets 500,1000,2000 --json-out misses.json

Outcomes of one evidence turn in one fresh context (`record=False`, as recall_rounds):
- `packed`: shown verbatim or trimmed (what evidence recall counts);
- `excerpt`: shown as a query-focused excerpt (planner.excerpt), not counted by recall;
- `room`: among the retrieved candidates the planner ranked, not packed (no room left);
- `below`: eligible for retrieval, ranked below the candidates read for this budget;
- `gated`: not eligible (a non-recall query class keeps only clearly related turns, or
  the turn was excluded: the latest user message, a hidden row).
`room` and `below` also carry rank buckets (`room<10`, `below<200`, ...), and each budget
reports the mean tokens per layer as sent (slice_tokens of evals.recall_rounds).

How it observes the ranking: the Memory's own Candidates object (one per Memory) has its
`retrieved` and `_top` wrapped for the run (instance attributes, nothing global), which
record the candidates returned and the eligible turns' ranking; the planner's code and
results are unchanged. Nothing here names a sample, a speaker, a topic or a question.

The file is read as recall_rounds reads it (`load_checked`: `tiermem eval`'s checked
reader), before any data dir is made: a file that is missing, not JSON or not a list of
samples, or a bad turn, is one line naming the file (`error: x.json: ...`, exit 1),
nothing written.
"""

from __future__ import annotations

import argparse
import contextlib
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tiermem.evals.baselines import INCLUDED_FIDELITIES
from tiermem.evals.locomo import CATEGORIES
from tiermem.evals.recall_rounds import (
    Variant,
    add_recall_args,
    applied,
    load_checked,
    mean_layers,
    prepared,
    report,
    slice_tokens,
    variant_arg,
)

OUTCOMES = ("packed", "excerpt", "room", "below", "gated")
ROOM_BUCKETS = (10, 20, 50)  # candidate rank bounds of the `room` buckets
BELOW_BUCKETS = (50, 200)  # full-ranking bounds of the `below` buckets


def bucket(kind: str, rank: int, bounds: Sequence[int]) -> str:
    for b in bounds:
        if rank < b:
            return f"{kind}<{b}"
    return f"{kind}{bounds[-1]}+"


def classify(position: int, shown: set[int], excerpted: set[int], candidates: Sequence[int],
             ranking: dict[int, int]) -> tuple[str, str]:
    """(outcome, bucket) of one evidence turn: `shown` verbatim/trimmed, `excerpted`,
    `candidates` (this conversation's retrieved candidates, best first) and `ranking`
    (eligible position -> rank over every eligible turn)."""
    if position in shown:
        return "packed", "packed"
    if position in excerpted:
        return "excerpt", "excerpt"
    if position in candidates:
        return "room", bucket("room", list(candidates).index(position), ROOM_BUCKETS)
    if position in ranking:
        return "below", bucket("below", ranking[position], BELOW_BUCKETS)
    return "gated", "gated"


class Probe:
    """Records, per context() call, the retrieved candidates and the eligible ranking."""

    def __init__(self) -> None:
        self.candidates: list[Any] = []
        self.ranking: dict[int, int] = {}

    @contextlib.contextmanager
    def on(self, cands: Any) -> Iterator[None]:
        top, retrieved = cands._top, cands.retrieved

        def _top(conv: str, table: Any, total: np.ndarray, idx: np.ndarray, depth: int) -> Any:
            out = top(conv, table, total, idx, depth)
            order = idx[np.argsort(-total[idx], kind="stable")]  # after any unanswered sinking
            self.ranking = {int(table.positions[i]): r for r, i in enumerate(order)}
            return out

        def _retrieved(*a: Any, **k: Any) -> Any:
            self.candidates, self.ranking = [], {}
            out = retrieved(*a, **k)
            self.candidates = list(out)
            return out

        cands._top, cands.retrieved = _top, _retrieved
        try:
            yield
        finally:
            del cands._top, cands.retrieved  # the class's methods again


def run(data: Path, budgets: Sequence[int], *, data_root: Path, sample_questions: int | None = None,
        variant: Variant | None = None) -> dict[str, Any]:
    """`variant`: recall_rounds' knobs set for the run (its off defaults apply: name the
    shipped weights it should keep); None: the planner as shipped."""
    counts: dict[str, dict[str, Counter[str]]] = {str(b): {str(c): Counter() for c in CATEGORIES} for b in budgets}
    buckets: dict[str, dict[str, Counter[str]]] = {str(b): {str(c): Counter() for c in CATEGORIES} for b in budgets}
    layers: dict[str, list[dict[str, int]]] = {str(b): [] for b in budgets}
    probe = Probe()
    samples = load_checked(data)  # refused before any data dir is made
    for prep in prepared(samples, data_root, hot=True, sample_questions=sample_questions):
        memory, cid, qs = prep.memory, prep.ingested.conversation_id, prep.questions
        setting = (applied(variant, memory.planner.settings.layers) if variant is not None
                   else contextlib.nullcontext())
        with probe.on(memory.planner.candidates), setting:
            for q in qs:
                for b in budgets:
                    ctx = memory.context(cid, q.qa.question, budget=b, namespace=cid, record=False)
                    items = [it for it in ctx.plan.items if it.conversation_id == cid]
                    shown = {p for it in items if it.fidelity in INCLUDED_FIDELITIES for p in it.positions}
                    excerpted = {p for it in items if it.fidelity == "excerpt" for p in it.positions}
                    order = [c.position for c in probe.candidates if c.conversation_id == cid]
                    for p in q.evidence_positions:
                        kind, where = classify(p, shown, excerpted, order, probe.ranking)
                        counts[str(b)][str(q.qa.category)][kind] += 1
                        buckets[str(b)][str(q.qa.category)][where] += 1
                    layers[str(b)].append(slice_tokens(ctx.plan))
    return {"data": str(data), "samples": [s.sample_id for s in samples], "budgets": list(budgets),
            "variant": None if variant is None else {"name": variant.name, "values": variant.values},
            "outcomes": {b: {c: dict(v) for c, v in d.items()} for b, d in counts.items()},
            "buckets": {b: {c: dict(v) for c, v in d.items()} for b, d in buckets.items()},
            "layer_tokens": {b: mean_layers(v) for b, v in layers.items()}}


def table(result: dict[str, Any]) -> str:
    lines = []
    for b in result["outcomes"]:
        lines.append(f"budget {b}: layers " + " ".join(f"{k}={v:.0f}" for k, v in result["layer_tokens"][b].items()))
        for c, got in result["outcomes"][b].items():
            n = sum(got.values())
            if not n:
                continue
            share = " ".join(f"{k} {100 * got.get(k, 0) / n:5.1f}" for k in OUTCOMES)
            fine = ", ".join(f"{k} {100 * v / n:.1f}" for k, v in sorted(result["buckets"][b][c].items())
                             if k.startswith(("room", "below")))
            lines.append(f"  cat {c} (n={n}): {share}  [{fine}]")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tiermem.evals.recall_misses", description=__doc__.split("\n")[0])
    add_recall_args(ap, budgets="500,1000,2000")
    ap.add_argument("--variant", type=variant_arg, default=None,
                    help="NAME:KEY=V,... as recall_rounds (default: as shipped)")
    args = ap.parse_args(argv)
    return report(args, lambda: run(args.data, args.budgets, data_root=args.data_root,
                                    sample_questions=args.sample_questions, variant=args.variant), table)


if __name__ == "__main__":
    raise SystemExit(main())
