"""The case of the tests where a correction is decided while the statement it revises
has no vector yet (the background indexer is embedding it): its texts, the import that
leaves the statement to the indexer, and the wait for the indexer to settle
(tests/test_correction_target_claimed.py, tests/test_supersede_recheck.py).

The old statement shares no word with the correction: only the meaning search finds it
(cosine ~0.39 over RETRACTION_ALONE_MIN_COSINE 0.35 with the test embedder)."""

from __future__ import annotations

import time

from tiermem import Memory

HOLD_S = 20.0  # the longest the indexer's model run is held for the test (seconds)
SETTLE_S = 60.0  # the longest the indexer may take to store and hook the rest (seconds)
SETTLE_POLL_S = 0.1  # how often `settle` looks at the pending vectors
OLD = "The most I can pay for the whole Lisbon trip is $3,250, please plan around that."
FIX = "Forget the spending limit I gave you, my company is paying for everything now."
FILLER = ["I had a long day at work.", "The weather was lovely this morning.", "I made pasta for dinner."]
# an import of more than INLINE_INDEX_ROWS (64) turns: decided by the rules at append, its
# embedding left to the background indexer (or whoever catches up), which reads all of it
# in one pool
IMPORT_TURNS = 70
CALLER_THREADS = ("MainThread",)  # the test's thread: the append and its catch-ups


def settle(mem: Memory, key: str, position: int) -> None:
    """Wait (SETTLE_S at most) until the indexer has stored every pending vector and every
    turn up to `position` is decided: what the re-check waits for."""
    deadline = time.monotonic() + SETTLE_S
    while mem.cold.pending_embeddings(key) and time.monotonic() < deadline:
        time.sleep(SETTLE_POLL_S)
    assert mem.cold.wait_decided(key, range(position + 1), SETTLE_S)
