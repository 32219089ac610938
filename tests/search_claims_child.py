"""A child process of tests/test_search_claims_wait.py: the same appends and searches
(in the conversation, and across its namespace) over a copy of one seeded data dir, each
search's hits printed as one JSON line, so that runs under different PYTHONHASHSEED can be
compared byte for byte.

    python tests/search_claims_child.py DATA_DIR MODE     (MODE: bg | sync)

bg: the background indexer on, as `tiermem serve` runs, racing each search's own
catch-up for the turn just appended. sync: the indexer off and every turn embedded before
the search (the reference)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from claims_wait_data import CONV, NS, replay

from tiermem import Memory
from tiermem.tiers.models import SearchHits

K = 8  # hits per search: the question just appended competes with the seeded turns


def _hits(hits: SearchHits) -> dict[str, Any]:
    return {"hits": [[h.conversation_id, h.position, h.score, sorted(h.ranks.items()), h.status]
                     for h in hits],
            "vectors_pending": hits.vectors_pending}


def _search(mem: Memory, i: int, q: str) -> dict[str, Any]:
    # in the conversation after even appends, across the namespace after odd ones
    conv = CONV if i % 2 == 0 else None
    return _hits(mem.search(conv, q, K, namespace=NS))


if __name__ == "__main__":
    replay(Path(sys.argv[1]), sys.argv[2], _search)
