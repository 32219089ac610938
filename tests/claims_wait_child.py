"""A child process of tests/test_context_claims_wait.py: the same appends and contexts
over a copy of one seeded data dir, each context's messages and plan items printed as
one JSON line, so that runs under different PYTHONHASHSEED can be compared byte for byte.

    python tests/claims_wait_child.py DATA_DIR MODE     (MODE: bg | sync)

bg: the background indexer on, as `tiermem serve` runs, racing each context's own
catch-up for the turn just appended. sync: the indexer off and every turn embedded before
the context (the reference)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from claims_wait_data import CONV, NS, QUESTION_AT, QUESTIONS

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder, build_embedder

BUDGET_TOKENS = 1000  # small enough that retrieval chooses among the seeded turns


def main(data_dir: Path, mode: str) -> None:
    emb = build_embedder()
    assert isinstance(emb, FastEmbedder)
    # the query vector from the export itself (not the fused session chosen by the load):
    # the same vectors whatever else runs, as tests/conftest.py's embedder
    emb.query_session = "never"
    emb.embed(["warm-up"])  # loaded: the indexer embeds only with a loaded model
    out = []
    with Memory(Config(data_dir=data_dir), embedder=emb, hot=False, background_indexing=mode == "bg") as mem:
        for i, q in enumerate(QUESTIONS):
            mem.append(CONV, {"role": "user", "content": q}, namespace=NS, created_at=QUESTION_AT + 60 * i)
            if mode == "sync":
                mem.catch_up(CONV, namespace=NS)
            ctx = mem.context(CONV, q, BUDGET_TOKENS, namespace=NS, record=False)
            out.append({"messages": ctx.messages,
                        "items": [[it.slice, list(it.positions), it.reason] for it in ctx.plan.items],
                        "vectors_pending": ctx.plan.vectors_pending})
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
