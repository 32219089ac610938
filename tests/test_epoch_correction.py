"""A user message corrected by the next one ends no epoch (planner.epoch.RAW_KINDS,
issue 22): the previous user message stays in place as a raw tail turn and the
correction follows it, in log order, as a rebuilt context's tail shows them too (a
rebuild billed ~1,100 tokens in full for the same lines: 0.45 points of conv-26's cost
replay). A shown line out of log order (retrieved, pinned) superseded since still ends
the epoch (tests/test_statements.py). Fails on the code before: the extension saw the
previous user message as a shown line superseded in part and started a new epoch. The
statement it superseded is marked in the retrieved block the extension appends (planner/marks.py)."""

from __future__ import annotations

import random

from tiermem import Memory
from tiermem.tiers.models import message_text

WORDS = ["garden", "violin", "harbour", "pancake", "glacier", "lantern", "marathon", "orchid", "pottery"]
BUDGET = 2000
FACTS = "My flight is LH 1172 and my hotel is the Tivoli Oriente."
CORRECTION = "Actually the hotel is now the Pestana Palace."


def test_a_correction_of_the_previous_user_message_extends_the_epoch(cold_memory: Memory) -> None:
    m = cold_memory
    rnd = random.Random(1)
    m.append_many("c", [{"role": "user" if i % 2 == 0 else "assistant",
                         "content": " ".join(rnd.sample(WORDS, 6)) + f" ({i})"} for i in range(60)])
    m.append("c", {"role": "assistant", "content": "Hi, how can I help?"})
    m.append("c", {"role": "user", "content": FACTS})
    first = m.context("c", FACTS, BUDGET)
    m.append("c", {"role": "assistant", "content": "Both saved."})
    m.append("c", {"role": "user", "content": CORRECTION})
    second = m.context("c", CORRECTION, BUDGET)
    assert m.cold.superseded_statements("c")  # the correction superseded the hotel statement
    assert not second.plan.cache.new_epoch, second.plan.cache.reason
    assert second.messages[:len(first.messages)] == first.messages  # the whole previous context is a prefix
    texts = [message_text(x) for x in second.messages]
    # the corrected message, the reply, then the correction: in log order, the old value
    # followed by what replaced it; the old statement is marked in this call's retrieved
    # block, appended before the correction (planner/marks.py), its flight still current
    assert [texts[-4], texts[-3], texts[-1]] == [FACTS, "Both saved.", CORRECTION]
    assert second.messages[-2]["role"] == "system"
    [mark] = [ln for ln in texts[-2].split("\n") if "SUPERSEDED, not current" in ln]
    assert "my hotel is the Tivoli Oriente" in mark and "LH 1172" not in mark
    assert second.tokens <= BUDGET

