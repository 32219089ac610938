"""A retraction with nothing to go on takes back the user's previous turn, and only it;
one that names its topic takes back every turn of that topic.

Invariants (consolidation/supersede.py, `_just_said`, `_rest_of_topic`):
- A bare retraction ("Never mind.", "Scratch that.") or one whose words match nothing
  ("Never mind, I'll check later.") revises the user's previous turn (the assistant's
  reply to it passed over) where that is a request or a load-bearing statement; where it
  was a question or small talk, it revises nothing. Before, it skipped over questions and
  small talk to the latest load-bearing turn however far back: "Never mind." after a
  question about the weather hid "I'm allergic to peanuts." and its echo.
- No chain, meaning search or value leads a bare retraction further back: "Never mind."
  after a question never retracts the end of a chain ("I moved to Lisbon").
- A retraction that names its topic ("Forget what I said about the spa.") takes back every
  current turn that holds it, of the best match's kind (a request for a request, a
  statement for a statement); before, only the latest.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from tiermem import Memory

CONV = "c"

Turn = str | tuple[str, str]  # a user turn's text, or (role, text)


def _superseded(mem: Memory, turns: Sequence[Turn]) -> dict[int, int]:
    """Append `turns` (a plain string is a user turn) and map each superseded position,
    whole turn or statement, to the position that superseded it."""
    msgs = [{"role": "user", "content": t} if isinstance(t, str) else {"role": t[0], "content": t[1]} for t in turns]
    mem.append_many(CONV, msgs)
    mem.catch_up(CONV)
    rows = mem.cold.turns(CONV)
    out = {r.position: r.superseded_by for r in rows if r.superseded_by is not None}
    out.update((s.position, s.superseded_by) for s in mem.cold.superseded_statements(CONV, [r.position for r in rows]))
    return out


_STORY = [("user", "Haha, my cat just knocked over a plant."), ("assistant", "Oh no!")]


# (the conversation, every superseded position -> its superseder)
@pytest.mark.parametrize(("turns", "expected"), [
    # the review's F1: "Never mind." takes back the weather question, nothing else; before,
    # the allergy (#0) and its echo (#1) were retracted by #3
    (["I'm allergic to peanuts.", ("assistant", "Noted: peanut allergy."),
      "What's the weather like in Rome tomorrow?", "Never mind."], {}),
    # F1b: after three exchanges of small talk; before, the allergy was retracted by #8
    (["I'm allergic to peanuts.", ("assistant", "Noted."), *_STORY * 3, "Never mind."], {}),
    # a retraction opener whose words match nothing, after a question: before, the allergy
    (["I'm allergic to peanuts.", ("assistant", "Noted."), "What's the weather like in Rome tomorrow?",
      ("assistant", "Sunny, 24 degrees."), "Never mind, I'll check later."], {}),
    # after a question, the end of a chain stays current: before, "I moved to Lisbon" (#2)
    # was retracted by #5
    (["I live in Porto.", ("assistant", "Noted."), "I moved to Lisbon last month.", ("assistant", "Updated."),
      "Is it sunny in Lisbon today?", "Never mind."], {0: 2}),
    # must keep working: the request just made, past the assistant's reply to it
    (["Book a table at Nong's for 7pm.", ("assistant", "Done."), "Never mind."], {0: 2}),
    # must keep working: "Scratch that" right after a request takes it, not the one before
    (["Always answer in French.", ("assistant", "D'accord."), "Set the meeting for 3pm.",
      ("assistant", "Set."), "Scratch that."], {2: 4}),
    # must keep working: a retraction opener whose object matched nothing, the request before
    (["Add a docstring to the module.", ("assistant", "Added."), "Rename list_orders to get_orders.",
      ("assistant", "Renamed."), "scratch that, keep the old name"], {2: 4}),
    # must keep working: a named topic, however far back the turn holding it
    (["My dog Rex needs a walk at 6pm every day.", ("assistant", "Noted."), *_STORY,
      "Forget what I said about my dog."], {0: 4}),
    # the review's F5: both spa bookings (and "Booked.", the first one's echo); before,
    # only Sunday's (#2)
    (["Book the spa for Saturday afternoon.", ("assistant", "Booked."),
      "Also book a massage at the spa on Sunday.", ("assistant", "Done."),
      "Forget what I said about the spa."], {0: 4, 1: 4, 2: 4}),
    # a topic's other turns only of the best one's kind: the flight and its echo, not the home
    (["I live in Porto.", ("assistant", "Noted."), "Book a flight to Porto for Friday.", ("assistant", "Booked."),
      "Forget about Porto."], {2: 4, 3: 4}),
])
def test_a_retraction_takes_back_what_it_refers_to(cold_memory: Memory, turns: Sequence[Turn],
                                                   expected: dict[int, int]) -> None:
    assert _superseded(cold_memory, turns) == expected


# filler that revises nothing and is revised by nothing: it moves the allergy out of the tail
FILLER = ["I had a long day at work.", "The weather was lovely this morning.", "I made pasta for dinner."]
# a budget whose pinned share (a tenth) holds the "Never mind." turn, pinned as a correction,
# and the allergy with its echo: at 350 the share holds only the first (README, noticed)
BUDGET_TOKENS = 1000


def test_the_allergy_stays_pinned_after_never_mind(cold_memory: Memory) -> None:
    # the review's F1 as the agent sees it: before, the plan left the allergy out as
    # "superseded by #3: not presented as current (... retracted)"
    filler: list[Turn] = [t for i in range(12) for t in (FILLER[i % len(FILLER)], ("assistant", "I see."))]
    _superseded(cold_memory, ["I'm allergic to peanuts.", ("assistant", "Noted: peanut allergy."),
                              "What's the weather like in Rome tomorrow?", "Never mind.", *filler])
    ctx = cold_memory.context(CONV, "Can you suggest a snack for my flight? Any allergies to keep in mind?",
                              BUDGET_TOKENS)
    assert any(it.slice == "pinned" and it.positions == [0] for it in ctx.plan.items), ctx.plan.items
    assert not any("superseded" in it.reason for it in ctx.plan.items + ctx.plan.left_out if 0 in it.positions)
    text = "\n".join(str(m.get("content")) for m in ctx.messages)
    assert "allergic to peanuts" in text and "SUPERSEDED" not in text, text
