"""A correction appended while the model is not loaded: the rules decide it at the append
only where that is the eager decision, and the end state is always the eager one and a
rebuild's (consolidation.supersede `Superseder.record`'s `final`; tiermem.memory append).

The rules see the window (SUPERSEDE_WINDOW positions) and the pins; the meaning search
sees every earlier turn. A rules pick made at the append (755bbf8) took an unrelated
window turn sharing a word where the real target lay further back ("The cabin was
freezing last night." for "Actually the wifi password at the cabin is now cedar77.", the
password 50 turns back), and the catch-up never revisited it: the wrong turn stayed
superseded, the real one current, and `rebuild` disagreed with the running processes.
Now the rules decide at the append only where no user turn lies before the window, no
kind was told by meaning and none was left for the meaning search; the rest wait for the
embedding.

Fails on the code before (755bbf8): the far rows (lazy after the catch-up held the
window turn as superseded besides the real target; the rebuild did not).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder, embedder_loaded

CONV = "c"
FILL = ["I had a long day at work.", "The weather was lovely this morning.", "I made pasta for dinner.",
        "We watched a documentary about whales.", "My cat knocked over a plant.", "Traffic was slow on the bridge.",
        "I read two chapters of a novel.", "The neighbours are painting their fence.", "I tried a new tea blend.",
        "The bakery ran out of croissants.", "I cleaned the garage on Sunday.", "My phone battery died at noon."]
FAR_FILL = 24  # exchanges between the target and the rest: 48 positions, past SUPERSEDE_WINDOW (40)
NEAR_FILL = 3  # all of it inside the window

WIFI = "The wifi password at the cabin is pinecone42."
CABIN = "The cabin was freezing last night."  # shares "cabin" with the correction, revises nothing
WIFI_NEW = "Actually the wifi password at the cabin is now cedar77."
SEAT = "My seat preference is an aisle seat."
BUS = "The seat on the bus was broken today."
SEAT_NEW = "Actually, switch my seat preference to a window seat."


def _fill(n: int) -> list[str]:
    return [f"{FILL[i % len(FILL)]} ({i})" for i in range(n)]


# (user turns, each answered; {superseded user turn: its superseder} in user-turn numbers,
# the eager result; whether the rules decide it at the append already)
CASES = {
    # far target, a window turn sharing a word: before, the rules took the cabin turn
    "far wifi": ([WIFI, *_fill(FAR_FILL), CABIN, WIFI_NEW], {0: FAR_FILL + 2}, False),
    # the same with the seat preference and a broken bus seat
    "far seat": ([SEAT, *_fill(FAR_FILL), BUS, SEAT_NEW], {0: FAR_FILL + 2}, False),
    # near target: every user turn is in the window, the rules' pick is the eager one
    "near wifi": ([WIFI, *_fill(NEAR_FILL), CABIN, WIFI_NEW], {0: NEAR_FILL + 2}, True),
    "near seat": ([SEAT, *_fill(NEAR_FILL), BUS, SEAT_NEW], {0: NEAR_FILL + 2}, True),
    # no target: nothing holds the password, so nothing is superseded. Until the named-slot
    # check (tests/test_supersede_named_slot.py) the eager pick was the cabin turn, its one
    # shared word "cabin" being the password's place, and the rules made that pick at the
    # append; now they find nothing and leave the correction to the meaning search, which
    # takes no turn that never mentions a password either
    "no target": ([*_fill(NEAR_FILL), CABIN, WIFI_NEW], {}, False),
    # no target past the window: the same, nothing (was the cabin turn too, left to the
    # embedding: earlier user turns lie before the window)
    "far no target": ([*_fill(FAR_FILL), CABIN, WIFI_NEW], {}, False),
    # a retraction naming a booking by its kind: told by meaning only (KindCheck), so it
    # waits for the model even with every turn in the window
    "kind by meaning": (["Book a table at Nong's for Friday at 7pm.", "Never mind the restaurant."], {0: 1}, False),
}


def _chat(mem: Memory, users: list[str]) -> None:
    for u in users:
        mem.append_many(CONV, [{"role": "user", "content": u}, {"role": "assistant", "content": "Noted."}])


def _superseded(mem: Memory) -> dict[int, int]:
    """Superseded user turns, by user-turn number (position // 2: each user turn is answered)."""
    return {r.position // 2: r.superseded_by // 2 for r in mem.cold.turns(CONV)
            if r.superseded_by is not None and r.role == "user"}


@pytest.mark.parametrize("case", list(CASES))
def test_lazy_equals_eager_and_rebuild(tmp_path: Path, embedder: FastEmbedder, case: str) -> None:
    users, want, at_append = CASES[case]
    with Memory(Config(data_dir=tmp_path / "eager"), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        _chat(mem, users)  # the model loaded: each correction decided before append returns
        eager = _superseded(mem)
    assert eager == want
    lazy = FastEmbedder()  # not loaded: appending never loads it
    with Memory(Config(data_dir=tmp_path / "lazy"), embedder=lazy, hot=False, background_indexing=False) as mem:
        _chat(mem, users)
        assert not embedder_loaded(lazy)
        assert _superseded(mem) == (want if at_append else {})
        mem.catch_up()  # what the indexer, `tiermem index` or a context call does
        assert embedder_loaded(lazy) and mem.cold.pending_embeddings(CONV) == 0
        assert _superseded(mem) == want
    with Memory(Config(data_dir=tmp_path / "lazy"), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        mem.rebuild()  # the log replayed: what every process must agree with
        assert _superseded(mem) == want
