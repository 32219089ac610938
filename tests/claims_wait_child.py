"""A child process of tests/test_context_claims_wait.py: the same appends and contexts
over a copy of one seeded data dir, each context's messages and plan items printed as
one JSON line, so that runs under different PYTHONHASHSEED can be compared byte for byte.

    python tests/claims_wait_child.py DATA_DIR MODE     (MODE: bg | sync)

bg: the background indexer on, as `tiermem serve` runs, racing each context's own
catch-up for the turn just appended. sync: the indexer off and every turn embedded before
the context (the reference)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from claims_wait_data import CONV, NS, replay

from tiermem import Memory

BUDGET_TOKENS = 1000  # small enough that retrieval chooses among the seeded turns


def _context(mem: Memory, _i: int, q: str) -> dict[str, Any]:
    ctx = mem.context(CONV, q, BUDGET_TOKENS, namespace=NS, record=False)
    return {"messages": ctx.messages,
            "items": [[it.slice, list(it.positions), it.reason] for it in ctx.plan.items],
            "vectors_pending": ctx.plan.vectors_pending}


if __name__ == "__main__":
    replay(Path(sys.argv[1]), sys.argv[2], _context)
