"""`python -m tiermem.evals.knowledge --pairs FILE`: supersession pairs scored through the
library's path (`evals.knowledge.pair_census`).

Invariants:
- Each line is a conversation of its user turns, each answered; what the correction
  superseded, a whole turn or a statement, is compared with ``expected`` (an index into
  ``earlier``, or null for nothing): right, wrong (something else superseded) or missed.
"""

from __future__ import annotations

import json
from pathlib import Path

from tiermem import Memory
from tiermem.evals.knowledge import pair_census

# (earlier turns, the correction, the label written in the file, the verdict)
ROWS = [
    # a day for a day: right
    (["Book me a flight to Denver on Tuesday.", "I need an aisle seat."], "Actually, make it Wednesday.", 0, "right"),
    # a lookalike labelled as such: right
    (["Book a table at Osteria Roma for Friday at 8pm."], "Not bad, thanks.", None, "right"),
    # labelled the other turn: wrong
    (["Book me a flight to Denver on Tuesday.", "I need an aisle seat."], "Actually, make it Wednesday.", 1, "wrong"),
    # labelled a correction where none is: missed
    (["My sister lives in Boston."], "I had pasta for dinner.", 0, "missed"),
]


def test_pairs_are_scored_through_the_library(cold_memory: Memory, tmp_path: Path) -> None:
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps({"earlier": e, "correction": c, "expected": x}) + "\n"
                            for e, c, x, _v in ROWS), encoding="utf-8")
    got = pair_census(cold_memory, path)
    want = {v: sum(1 for *_r, w in ROWS if w == v) for v in ("right", "wrong", "missed")}
    assert {k: got[k] for k in want} == want
    assert got["n"] == len(ROWS) and len(got["errors"]) == want["wrong"] + want["missed"]
