"""A child process of tests/test_search_claims_wait.py: the same appends and searches
(in the conversation, and across its namespace) over a copy of one seeded data dir, each
search's hits printed as one JSON line, so that runs under different PYTHONHASHSEED can be
compared byte for byte.

    python tests/search_claims_child.py DATA_DIR MODE     (MODE: bg | sync)

bg: the background indexer on, as `tiermem serve` runs, racing each search's own
catch-up for the turn just appended. sync: the indexer off and every turn embedded before
the search (the reference)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from claims_wait_data import CONV, NS, QUESTION_AT, QUESTIONS

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder, build_embedder
from tiermem.tiers.models import SearchHits

K = 8  # hits per search: the question just appended competes with the seeded turns


def _hits(hits: SearchHits) -> dict[str, Any]:
    return {"hits": [[h.conversation_id, h.position, h.score, sorted(h.ranks.items()), h.status]
                     for h in hits],
            "vectors_pending": hits.vectors_pending}


def main(data_dir: Path, mode: str) -> None:
    emb = build_embedder()
    assert isinstance(emb, FastEmbedder)
    emb.query_session = "never"  # the export's own query vectors, as tests/conftest.py's embedder
    emb.embed(["warm-up"])  # loaded: the indexer embeds only with a loaded model
    out = []
    with Memory(Config(data_dir=data_dir), embedder=emb, hot=False, background_indexing=mode == "bg") as mem:
        for i, q in enumerate(QUESTIONS):
            mem.append(CONV, {"role": "user", "content": q}, namespace=NS, created_at=QUESTION_AT + 60 * i)
            if mode == "sync":
                mem.catch_up(CONV, namespace=NS)
            # in the conversation after even appends, across the namespace after odd ones
            conv = CONV if i % 2 == 0 else None
            out.append(_hits(mem.search(conv, q, K, namespace=NS)))
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
