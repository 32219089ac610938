"""A superseded turn the raw tail shows is marked in the context (planner/marks.py).

When the whole log fits the budget the context was the log verbatim with no SUPERSEDED
mark at all: a user who corrected themselves in a short conversation was shown the old
value unmarked, while a long conversation showed the same turn retrieved and marked.

Invariants:
- Every turn the context shows raw that is superseded now, wholly or in part, is marked
  once: its line as a retrieved superseded turn's (" · SUPERSEDED, not current: ..."), in
  the retrieved block; of a turn superseded in part only the superseded statement (what
  still holds is the tail's). A correction popped since supersedes nothing: no mark.
- Prefix stability: within an epoch the previous context stays the prefix; a mark is
  appended only for a correction that is new, and is never sent twice.
"""

from __future__ import annotations

import pytest

from tiermem import Memory
from tiermem.tiers.formats import RETRACT_TYPE

MARK = "SUPERSEDED, not current"
BUDGET = 2000  # the whole log of every case fits


def _say(mem: Memory, users: list[str]) -> None:
    for u in users:
        mem.append_many("c", [{"role": "user", "content": u}, {"role": "assistant", "content": "Noted."}])


def _marked(messages: list[dict[str, object]]) -> list[str]:
    """Every line of the context that carries the mark."""
    return [ln for m in messages if isinstance(m.get("content"), str)
            for ln in str(m["content"]).split("\n") if MARK in ln]


# (the user's turns, each answered "Noted.", then a question; what the marked lines say;
# what no marked line may say)
@pytest.mark.parametrize(("users", "marked", "current"), [
    # a value replaced (before: no mark)
    (["My budget for the trip is $3,000.", "Actually my budget is $4,500 now."],
     ["My budget for the trip is $3,000."], ["$4,500"]),
    # a plan called off (before: no mark)
    (["Book a table at Nong's for Friday at 7pm.", "I had a long day at work.", "The restaurant is off."],
     ["Book a table at Nong's for Friday at 7pm."], ["long day"]),
    # a turn superseded in part: only its superseded statement is marked (before: no mark)
    (["My flight lands at 9am and my hotel is the Hilton.", "Actually my hotel is the Marriott now."],
     ["my hotel is the Hilton"], ["9am", "Marriott"]),
    # nothing corrected: nothing marked (as before)
    (["My budget for the trip is $3,000.", "I also like beaches."], [], ["$3,000"]),
])
def test_a_whole_log_context_marks_what_was_superseded(cold_memory: Memory, users: list[str],
                                                       marked: list[str], current: list[str]) -> None:
    _say(cold_memory, users)
    cold_memory.append("c", {"role": "user", "content": "Which hotels fit?"})
    ctx = cold_memory.context("c", "Which hotels fit?", BUDGET)
    # the whole log is there, as it was said
    assert [m["content"] for m in ctx.messages if m["role"] == "user"] == [*users, "Which hotels fit?"]
    lines = _marked(ctx.messages)
    assert len(lines) == len(marked)
    for want, line in zip(marked, lines, strict=True):
        assert want in line
    assert not any(c in line for c in current for line in lines)
    assert ctx.tokens <= BUDGET


def test_a_popped_correction_leaves_nothing_marked(cold_memory: Memory) -> None:
    _say(cold_memory, ["My budget for the trip is $3,000."])
    [corr] = cold_memory.append_many("c", [{"role": "user", "content": "Actually my budget is $4,500 now."}])
    assert cold_memory.cold.turns("c")[0].superseded_by == corr
    assert _marked(cold_memory.context("c", "Which hotels fit?", BUDGET, record=False).messages)
    cold_memory.append("c", {"type": RETRACT_TYPE, "position": corr})
    cold_memory.append("c", {"role": "user", "content": "Which hotels fit?"})
    assert _marked(cold_memory.context("c", "Which hotels fit?", BUDGET).messages) == []


def test_a_new_correction_is_appended_within_the_epoch(cold_memory: Memory) -> None:
    _say(cold_memory, ["My budget for the trip is $3,000."])
    cold_memory.append("c", {"role": "user", "content": "Which hotels fit?"})
    first = cold_memory.context("c", "Which hotels fit?", BUDGET)
    assert _marked(first.messages) == []
    # the correction arrives: the previous context stays the prefix, its mark is appended
    cold_memory.append_many("c", [{"role": "assistant", "content": "The Ibis fits."},
                                  {"role": "user", "content": "Actually my budget is $4,500 now."}])
    second = cold_memory.context("c", "Actually my budget is $4,500 now.", BUDGET)
    assert not second.plan.cache.new_epoch
    assert second.messages[:len(first.messages)] == first.messages
    [line] = _marked(second.messages[len(first.messages):])
    assert "My budget for the trip is $3,000." in line
    # nothing new corrected: the mark stays in the prefix and is not sent again
    cold_memory.append_many("c", [{"role": "assistant", "content": "Updated."},
                                  {"role": "user", "content": "Which one is nearest the beach?"}])
    third = cold_memory.context("c", "Which one is nearest the beach?", BUDGET)
    assert not third.plan.cache.new_epoch
    assert third.messages[:len(second.messages)] == second.messages
    assert _marked(third.messages) == [line]
    assert third.tokens <= BUDGET
