"""Evidence recall of planner variants (episode keys, a second retrieval round) against the
current planner, in one run, with leave-one-conversation-out weight choice.

    python -m tiermem.evals.recall_rounds --data ../shared/data/locomo-dev.json \\
        --budgets 500,1000,2000,4000 --variant base: --variant hop:hop=1.0 \\
        --variant keys:keys=0.5 --variant both:hop=1.0,keys=0.5 --json-out rounds.json

Each sample of the LoCoMo-format file is ingested alone, into a Memory of its own (its
data dir under `--data-root`, reused when it holds the sample already; hot tier on, as in
`tiermem eval locomo`). Every question is then asked with every variant at every budget,
as a what-if context (`record=False`): no call extends another's epoch, as in the
standard multi-budget eval, where each call changes the budget and so starts anew. A
variant sets the planner's weights for its calls (`hop`: multihop.HOP_WEIGHT, `dense`:
multihop.HOP_DENSE_WEIGHT, `keys`: episodes.KEY_WEIGHT, `seeds`: multihop.SEED_TURNS,
`keytf`: episodes.KEY_MIN_TF, `spread`: episodes.SPREAD_WEIGHT, `cross`: multihop.HOP_OTHER_EPISODES, `hoproom`: multihop.HOP_MIN_ROOM_TOKENS (0 unless set); unnamed weights stay off;
`density`: density.DENSITY_WEIGHT, `terse`: render.TERSE, `speaker`: speakers.SPEAKER_BOOST, `episode`:
rank.EPISODE, `neighbour`: rank.NEIGHBOUR keep their shipped values unless set), then they are put back.

Reported per variant and budget: evidence recall pooled over every question with
evidence, by category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop,
5 adversarial), per sample, and context() p50/p99; `--baselines` adds the top-k
baselines of `evals.baselines` packed into the same budgets. Leave-one-out: for each
sample, the variant with the best pooled recall over the other samples at that budget,
and its recall on the held-out one, against the base variant's (the first).

Nothing here names a sample, a speaker, a topic or a question.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tiermem.evals.baselines import (
    INCLUDED_FIDELITIES,
    ConvView,
    close_memory,
    mean,
    open_memory,
    percentiles,
    rank_all,
    run_baseline,
)
from tiermem.evals.locomo import (
    CATEGORIES,
    EvidenceCounts,
    embed_pending,
    ingest_sample,
    load_samples,
    resolve_questions,
)
from tiermem.planner import density, episodes, multihop, rank, render, speakers
from tiermem.tiers.errors import ValidationError

BASELINE_METHODS = ("hybrid_topk", "bm25_topk", "dense_topk", "tail")
# variant key -> (module, constant): what a variant may set; every other one is off
KNOBS: dict[str, tuple[Any, str]] = {
    "hop": (multihop, "HOP_WEIGHT"),
    "dense": (multihop, "HOP_DENSE_WEIGHT"),
    "seeds": (multihop, "SEED_TURNS"),
    "keys": (episodes, "KEY_WEIGHT"),
    "keytf": (episodes, "KEY_MIN_TF"),
    "spread": (episodes, "SPREAD_WEIGHT"),
    "cross": (multihop, "HOP_OTHER_EPISODES"),
    "hoproom": (multihop, "HOP_MIN_ROOM_TOKENS"),
    "density": (density, "DENSITY_WEIGHT"),
    "terse": (render, "TERSE"),
    "speaker": (speakers, "SPEAKER_BOOST"),
    "episode": (rank, "EPISODE"),
    "neighbour": (rank, "NEIGHBOUR"),
}
# off unless a variant sets them; the hop's room gate is off too (0), so that a variant's
# hop runs at every budget
OFF: dict[str, float] = {"hop": 0.0, "dense": 0.0, "keys": 0.0, "spread": 0.0, "hoproom": 0}


@dataclass(frozen=True)
class Variant:
    name: str
    values: dict[str, float]


def parse_variant(spec: str) -> Variant:
    """'both:hop=1.0,keys=0.5' -> Variant('both', {...}); 'base:' sets nothing (all off)."""
    name, sep, rest = spec.partition(":")
    if not sep or not name.strip():
        raise ValidationError("variant", f"{spec!r} is not NAME:KEY=V,...")
    values: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in rest.split(","))):
        k, eq, v = part.partition("=")
        if not eq or k not in KNOBS:
            raise ValidationError("variant", f"{part!r}: keys are {sorted(KNOBS)}")
        values[k] = float(v)
    return Variant(name.strip(), values)


@contextlib.contextmanager
def applied(v: Variant) -> Iterator[None]:
    """The planner's weights set as the variant says (the rest off) for the block."""
    saved = {k: getattr(mod, attr) for k, (mod, attr) in KNOBS.items()}
    try:
        for k, (mod, attr) in KNOBS.items():
            val = v.values.get(k, OFF.get(k, saved[k]))
            setattr(mod, attr, type(saved[k])(val))
        yield
    finally:
        for k, (mod, attr) in KNOBS.items():
            setattr(mod, attr, saved[k])


Rec = tuple[str, int, float]  # sample, category, recall


def _summary(recs: Sequence[Rec], ms: Sequence[float]) -> dict[str, Any]:
    def r(xs: Sequence[float]) -> float | None:
        m = mean(list(xs))
        return None if m is None else round(m, 4)

    samples = sorted({s for s, _c, _r in recs})
    return {
        "evidence_recall": r([x for _s, _c, x in recs]),
        "questions": len(recs),
        "by_category": {str(c): r([x for _s, cat, x in recs if cat == c]) for c in CATEGORIES},
        "by_sample": {s: r([x for ss, _c, x in recs if ss == s]) for s in samples},
        "by_sample_category": {s: {str(c): r([x for ss, cat, x in recs if ss == s and cat == c])
                                   for c in CATEGORIES} for s in samples},
        "context_ms": percentiles(list(ms)) if ms else None,
    }


def leave_one_out(results: dict[str, dict[str, list[Rec]]], variants: Sequence[Variant],
                  budget: str) -> dict[str, Any]:
    """Per held-out sample: the variant chosen on the others (best pooled recall at this
    budget), its held-out recall and by category, and the base variant's (the first)."""
    recs = {v.name: results[v.name][budget] for v in variants}
    samples = sorted({s for s, _c, _r in recs[variants[0].name]})
    base = variants[0].name
    out: dict[str, Any] = {}
    def pooled(name: str, held: str, inside: bool) -> float:
        xs = [x for s, _c, x in recs[name] if (s == held) == inside]
        return sum(xs) / len(xs) if xs else 0.0

    for held in samples:
        def on_others(name: str, held: str = held) -> tuple[float, bool]:
            return pooled(name, held, False), name == base

        chosen = max((v.name for v in variants), key=on_others)
        held_recs = {n: [(s, c, x) for s, c, x in recs[n] if s == held] for n in (base, chosen)}
        out[held] = {
            "chosen": chosen,
            "chosen_on_others": round(pooled(chosen, held, False), 4),
            "held_out": round(pooled(chosen, held, True), 4),
            "base_held_out": round(pooled(base, held, True), 4),
            "held_out_by_category": {str(c): _cat(held_recs[chosen], c) for c in CATEGORIES},
            "base_by_category": {str(c): _cat(held_recs[base], c) for c in CATEGORIES},
        }
    return out


def _cat(recs: Sequence[Rec], c: int) -> float | None:
    xs = [x for _s, cat, x in recs if cat == c]
    return round(sum(xs) / len(xs), 4) if xs else None


def run(data: Path, budgets: Sequence[int], variants: Sequence[Variant], *, data_root: Path,
        sample_questions: int | None, baselines: bool, hot: bool = True) -> dict[str, Any]:
    samples = load_samples(data)
    results: dict[str, dict[str, list[Rec]]] = {v.name: {str(b): [] for b in budgets} for v in variants}
    latency: dict[str, dict[str, list[float]]] = {v.name: {str(b): [] for b in budgets} for v in variants}
    base_recs: dict[str, dict[str, list[Rec]]] = {m: {str(b): [] for b in budgets} for m in BASELINE_METHODS}
    t0 = time.perf_counter()
    for sample in samples:
        path = data_root / sample.sample_id
        path.mkdir(parents=True, exist_ok=True)
        opened = open_memory(path, hot=hot)
        memory = opened.memory
        try:
            ing = ingest_sample(memory, sample)
            embed_pending(memory, ing.conversation_id)
            qs = [q for q in resolve_questions(ing, 0, None, EvidenceCounts()) if q.evidence_positions]
            if sample_questions is not None:
                step = max(1, len(qs) // sample_questions)
                qs = qs[::step][:sample_questions]  # spread over the conversation, the same every run
            cid = ing.conversation_id
            view = ConvView.load(memory, cid) if baselines else None
            for v in variants:
                with applied(v):
                    for q in qs:
                        for b in budgets:
                            t = time.perf_counter()
                            ctx = memory.context(cid, q.qa.question, budget=b, namespace=cid, record=False)
                            latency[v.name][str(b)].append((time.perf_counter() - t) * 1000)
                            got = {p for it in ctx.plan.items if it.conversation_id == cid
                                   and it.fidelity in INCLUDED_FIDELITIES for p in it.positions}
                            hit = sum(1 for p in q.evidence_positions if p in got)
                            results[v.name][str(b)].append(
                                (sample.sample_id, q.qa.category, hit / len(q.evidence_positions)))
            if view is not None:
                for q in qs:
                    rankings = rank_all(memory, view, q.qa.question, BASELINE_METHODS)
                    for b in budgets:
                        for m in BASELINE_METHODS:
                            packed, _ms = run_baseline(m, view, rankings, b)
                            hit = sum(1 for p in q.evidence_positions if p in packed.positions)
                            base_recs[m][str(b)].append(
                                (sample.sample_id, q.qa.category, hit / len(q.evidence_positions)))
        finally:
            close_memory(opened)
    out: dict[str, Any] = {
        "data": str(data),
        "samples": [s.sample_id for s in samples],
        "budgets": list(budgets),
        "sample_questions": sample_questions,
        "elapsed_s": round(time.perf_counter() - t0, 1),
        "variants": {v.name: {"values": v.values,
                              "budgets": {str(b): _summary(results[v.name][str(b)], latency[v.name][str(b)])
                                          for b in budgets}} for v in variants},
        "leave_one_out": {str(b): leave_one_out(results, variants, str(b)) for b in budgets},
        # every (sample, category, recall), for leave-one-out over any subset of the variants
        "records": {v.name: {str(b): results[v.name][str(b)] for b in budgets} for v in variants},
    }
    if baselines:
        out["baselines"] = {m: {str(b): _summary(base_recs[m][str(b)], []) for b in budgets}
                            for m in BASELINE_METHODS}
    return out


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def table(result: dict[str, Any]) -> str:
    lines = []
    cats = "".join(f" {'c' + str(c):>6}" for c in CATEGORIES)
    lines.append(f"{'variant':<14} {'budget':>6} {'recall':>7}{cats} {'p50':>6} {'p99':>6}")
    rows = [(n, r) for n, r in result["variants"].items()] + [(m, {"budgets": r})
                                                            for m, r in result.get("baselines", {}).items()]
    for name, r in rows:
        for b, s in r["budgets"].items():
            c = "".join(f" {_pct(s['by_category'][str(k)]):>6}" for k in CATEGORIES)
            ms = s.get("context_ms") or {}
            p50 = "-" if ms.get("p50") is None else f"{ms['p50']:.1f}"
            p99 = "-" if ms.get("p99") is None else f"{ms['p99']:.1f}"
            lines.append(f"{name:<14} {b:>6} {100 * (s['evidence_recall'] or 0):7.1f}{c} {p50:>6} {p99:>6}")
    for b, folds in result["leave_one_out"].items():
        for held, f in folds.items():
            lines.append(f"LOO {b} {held}: chose {f['chosen']} ({100 * f['chosen_on_others']:.1f} on the others), "
                         f"held-out {100 * f['held_out']:.1f} vs base {100 * f['base_held_out']:.1f}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tiermem.evals.recall_rounds", description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=Path("..") / "shared" / "data" / "locomo-dev.json")
    ap.add_argument("--budgets", default="2000", help="comma-separated token budgets")
    ap.add_argument("--variant", action="append", default=[], help="NAME:KEY=V,... (the first is the base)")
    ap.add_argument("--data-root", type=Path, default=Path("/tmp/tiermem-recall-rounds"),
                    help="one data dir per sample under it, reused between runs")
    ap.add_argument("--sample-questions", type=int, default=None, help="questions per sample (spread evenly)")
    ap.add_argument("--baselines", action="store_true", help="also the top-k baselines and the tail")
    ap.add_argument("--json-out", type=Path, default=None)
    args = ap.parse_args(argv)
    budgets = sorted({int(x) for x in args.budgets.split(",") if x.strip()})
    variants = [parse_variant(s) for s in (args.variant or ["base:"])]
    result = run(args.data, budgets, variants, data_root=args.data_root,
                 sample_questions=args.sample_questions, baselines=args.baselines)
    if args.json_out is not None:
        args.json_out.write_text(json.dumps(result, indent=2))
    print(table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
