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

import pytest

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


DATA = Path(__file__).resolve().parent.parent / "evals" / "data"


# (held-out pairs file, the least right, the most wrong) -- floors, as
# test_knowledge_floors.py holds the knowledge sets' figures
@pytest.mark.parametrize(("name", "least_right", "most_wrong"), [
    # the second round's held-out set (0d819cf): 16 right, 1 wrong before its rules; 24 of 26 after
    ("supersede_heldout2.jsonl", 24, 0),
    # the errand set (e98157c): 13 right, 3 wrong supersessions before; 16 of 16 after
    ("supersede_heldout3.jsonl", 16, 0),
])
def test_held_out_pairs_keep_their_figures(cold_memory: Memory, name: str, least_right: int,
                                           most_wrong: int) -> None:
    got = pair_census(cold_memory, DATA / name)
    assert got["right"] >= least_right and got["wrong"] <= most_wrong, got["errors"]
