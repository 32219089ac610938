"""Whether the query path a call takes changes any context: every LoCoMo question asked
twice at each budget, once with the query embedded by the query session (the fused graph,
tiers.embed_onnx.QUERY_MODEL_FILE: what an idle machine takes) and once by the export on
one thread (what a busy one takes), and the two plans compared item by item.

    python -m tiermem.evals.query_paths --data ../shared/data/locomo-dev.json \\
        --budgets 500,2000 [--json-out PATH]

Why: the two paths' vectors differ at the 1e-7 level (cosine 0.9999999), and which one
answers depends on the machine's other work at the moment of the call (tiers.embed_onnx.spare_core),
so a context is only reproducible if no ranking is that close. Each sample is ingested into
its own Memory under `--data-root` (reused between runs, as recall_rounds' are); the
memo of recent texts is off, so every call embeds its query. Reported: contexts compared,
how many plans differ (slice, fidelity and positions of every item), and evidence recall
by each path. Nothing here names a sample, a speaker, a topic or a question.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tiermem.evals.baselines import INCLUDED_FIDELITIES
from tiermem.evals.recall_rounds import add_recall_args, load_checked, prepared
from tiermem.tiers.embed_onnx import QUERY_MODEL_FILE, FastEmbedder, QuerySessionPolicy
from tiermem.tiers.errors import DataFileError

PATHS = ("query session", "export, one thread")
# FastEmbedder.query_session for each path, whatever this run's own load
POLICIES: tuple[QuerySessionPolicy, ...] = ("always", "never")


def _plan(ctx: Any) -> list[tuple[str, str, tuple[int, ...]]]:
    return [(it.slice, it.fidelity, tuple(it.positions)) for it in ctx.plan.items]


def run(data: Path, budgets: Sequence[int], *, data_root: Path) -> dict[str, Any]:
    samples = load_checked(data)  # as recall_rounds reads it: refused before any data dir is made
    compared = differing = 0
    recall = {p: 0.0 for p in PATHS}
    per_sample: dict[str, dict[str, int]] = {}
    for prep in prepared(samples, data_root, hot=True, sample_questions=None):
        emb = prep.memory.embedder
        if not isinstance(emb, FastEmbedder) or emb.prepare_query_graph() != QUERY_MODEL_FILE:
            raise SystemExit("the ONNX runtime with its fused query graph is needed (tiermem model)")
        emb.memo_size = 0
        cid = prep.ingested.conversation_id
        mine = {"contexts": 0, "differing": 0}
        for q in prep.questions:
            for b in budgets:
                plans = []
                for path, policy in zip(PATHS, POLICIES, strict=True):
                    emb.query_session = policy
                    ctx = prep.memory.context(cid, q.qa.question, budget=b, namespace=cid, record=False)
                    plans.append(_plan(ctx))
                    shown = {p for it in ctx.plan.items if it.conversation_id == cid
                             and it.fidelity in INCLUDED_FIDELITIES for p in it.positions}
                    recall[path] += sum(p in shown for p in q.evidence_positions) / len(q.evidence_positions)
                mine["contexts"] += 1
                mine["differing"] += plans[0] != plans[1]
        per_sample[prep.label] = mine  # a sample_id the file repeats: -2, -3, ..., not merged
        compared += mine["contexts"]
        differing += mine["differing"]
    return {"data": str(data), "budgets": list(budgets), "contexts": compared, "differing_plans": differing,
            "per_sample": per_sample,
            "evidence_recall": {p: round(100 * v / max(compared, 1), 2) for p, v in recall.items()}}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tiermem.evals.query_paths", description=__doc__.split("\n")[0])
    add_recall_args(ap, budgets="500,2000", sample_questions=False)
    args = ap.parse_args(argv)
    budgets = args.budgets
    try:
        result = run(args.data, budgets, data_root=args.data_root)
    except DataFileError as exc:  # a file `tiermem eval` would refuse too: one line, exit 1
        raise SystemExit(f"error: {exc}") from None
    if args.json_out is not None:
        args.json_out.write_text(json.dumps(result, indent=2))
    print(f"{result['contexts']} contexts (every question at budgets {budgets}), "
          f"{result['differing_plans']} plans differ between the query paths; evidence recall "
          + ", ".join(f"{p} {r}%" for p, r in result["evidence_recall"].items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
