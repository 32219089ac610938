"""An assistant's short acknowledgement follows its source when the source is corrected
(consolidation/supersede.py, `ECHO_SHORT_WORDS`), and a number said in words is the same
value as in digits: otherwise the stale value stays in the context unmarked, under the
correction. The first three rows fail on the code before (evals.knowledge's held-out set
missed them: echoes 0.826, present 0.974)."""

from __future__ import annotations

import pytest

from tiermem import Memory

T0 = 1_777_600_000.0  # 2026-05-01 01:46 UTC
HOUR = 3600.0


# (the user's statement, the assistant's reply to it, the correction, whether the reply follows)
@pytest.mark.parametrize(("said", "reply", "correction", "follows"), [
    # a lower-case name, one word in common, in a three-word reply
    ("Use requests for the HTTP client.", "requests it is.", "Switch to httpx instead.", True),
    # the verb of the source is a cue word; the name alone is shared, in a short reply
    ("Switch to httpx instead.", "Switched to httpx.", "Actually, use aiohttp instead of httpx.", True),
    # a number word for the digits of the source
    ("We need a room for 4 nights.", "Four nights.", "Make it 5 nights actually.", True),
    # a long reply with one word in common restates nothing
    ("Use requests for the HTTP client.",
     "Noted. By the way, the team also asked about client timeouts and retries for tomorrow.",
     "Switch to httpx instead.", False),
    # a short reply on another subject
    ("Use requests for the HTTP client.", "Sounds good to me.", "Switch to httpx instead.", False),
])
def test_a_short_acknowledgement_follows_its_source(cold_memory: Memory, said: str, reply: str, correction: str,
                                                    follows: bool) -> None:
    turns = [("user", said), ("assistant", reply), ("user", correction)]
    cold_memory.append_many("c", [{"role": r, "content": t, "created_at": T0 + i * HOUR}
                                  for i, (r, t) in enumerate(turns)])
    sup = {r.position: r.superseded_by for r in cold_memory.cold.turns("c") if r.superseded_by is not None}
    assert sup.get(0) == 2  # the correction supersedes the statement
    assert (sup.get(1) == 2) is follows
