"""Life updates a reviewer's month-long assistant scenario got wrong (cut to two turns,
generalised): a job change marked the user's move as replaced (they share a city), the
move ended the old job, "I'm vegetarian now." revised nothing, and "call me Sam, not
Samuel." left "Hi! I'm Samuel Ortiz." current.

Invariants:
- A change revises only a statement of the same kind of the user's fact where both tell
  one (`supersede.fact_kinds`, closed word classes: where they live, where they work, what
  they eat, what they are called): a job named with its city is no move, a move ends no
  job; a statement of none of these kinds fits any, as before.
- A diet told as changed ("I'm vegetarian now", "I went vegan", "I don't eat fish
  anymore") revises the latest statement of what the user eats, and the assistant's echo
  of it follows its source.
- A name given anew with the one it replaces ("call me Sam, not Samuel") revises the
  statement that gave that name, a greeting's ("Hi! I'm Samuel Ortiz.") too; never one
  that gave another name.
"""

from __future__ import annotations

import pytest
from supersede_harness import superseded_users

from tiermem import Memory
from tiermem.consolidation import supersede

MOVE = "Big news: I moved to Seattle this weekend. I live in Seattle now, in Capitol Hill."
JOB_CHANGE = ("And I changed jobs: I left Providence and I now work as a nurse practitioner at Swedish "
              "Medical Center in Seattle.")
FOOD = "For food: I eat fish and chicken but no red meat."
INTRO = ("Hi! I'm Samuel Ortiz. I live in Portland, Oregon, and I work as an ER nurse at Providence "
         "Portland Medical Center.")


# (a statement, the kinds of the user's fact it tells)
@pytest.mark.parametrize(("text", "kinds"), [
    (MOVE, {"home"}),
    (JOB_CHANGE, {"work"}),  # its city ("in Seattle") is the employer's, no residence
    ("I moved jobs last month.", {"work"}),  # "moved" a job: no move of home
    ("The meeting moved to Friday.", set()),  # a thing moved to a day: nobody's home
    (FOOD, {"diet"}),
    ("I eat lunch at noon.", set()),  # a meal's hour, no diet
    ("I had a long day at work.", set()),  # work as a place of the day, no job told
    ("Hi! I'm Samuel Ortiz.", {"name"}),
    ("I'm tired.", set()),  # "I'm" before a plain word gives no name
    ("Please call me Kate.", {"name"}),
])
def test_fact_kinds(text: str, kinds: set[str]) -> None:
    assert supersede.fact_kinds(text) == kinds


# (the user's turns, each answered "Noted.", and {superseded user turn: its superseder})
@pytest.mark.parametrize(("users", "want"), [
    # -- a job change is no move (before: {0: 1} for both) --
    ([MOVE, JOB_CHANGE], {}),
    (["I live in Denver now, in Five Points.", "I now work as a barista at Blue Bottle in Denver."], {}),
    # -- a diet told as changed (before: {} for the first three) --
    ([FOOD, "Quick update: I'm vegetarian now. No more fish or chicken."], {0: 1}),  # the reviewer's
    (["I eat fish and chicken.", "I'm vegetarian now."], {0: 1}),  # nothing shared but the kind
    (["I eat beef and pork most days.", "I went vegan last month."], {0: 1}),
    (["I eat fish twice a week.", "I don't eat fish anymore."], {0: 1}),  # (held before: a shared word)
    # -- a name given anew, the old one named (before: {} for each) --
    (["Hi! I'm Samuel Ortiz.", "By the way, call me Sam, not Samuel. Everyone does."], {0: 1}),  # a greeting's
    (["Hi, I'm Katherine Lee.", "Please call me Kate, not Katherine."], {0: 1}),
    (["I'm Robert.", "I go by Bob now, not Robert."], {0: 1}),
    # -- held before, hold still --
    (["My name is Samuel.", "Please call me Sam instead of Samuel."], {0: 1}),
    (["I live in Portland.", "I moved to Seattle."], {0: 1}),  # a move, where the user lives
    (["I work at Acme.", "I now work at Globex."], {0: 1}),  # a job change, where they work
    (["I work as an ER nurse at Providence.", MOVE], {}),  # a move ends no job
    # -- controls: none of these revises the other --
    (["I work in Seattle.", "I live in Tacoma now."], {}),  # where they live is no workplace
    (["I work in Seattle.", "I moved to Tacoma."], {}),  # (before: {0: 1}, a place for a place)
    # "moved jobs" is no move (before: {0: 1})
    (["I live in Seattle.", "I moved jobs, I now work at Costco."], {}),
    (["I live in Portland.", "I'm vegetarian now."], {}),  # a diet is no home
    (["My sister eats fish.", "I'm vegetarian now."], {}),  # another person's diet
    (["My name is Bob.", "Call me Sam, not Samuel."], {}),  # another name than the one replaced
    (["Hi! I'm Samuel Ortiz.", "I'm vegan now."], {}),  # a diet is no name
    (["I eat fish and chicken.", "Call me Sam, not Samuel."], {}),
])
def test_life_updates(cold_memory: Memory, users: list[str], want: dict[int, int]) -> None:
    assert superseded_users(cold_memory, users) == want


def test_each_update_revises_its_own_statement(cold_memory: Memory) -> None:
    """The reviewer's month in one conversation: each statement of the introduction is
    revised by the update of its kind, and holds until that one (before: the move ended
    both the home and the job, and the job change superseded the move)."""
    users = [INTRO, FOOD, "Quick update: I'm vegetarian now. No more fish or chicken.",
             "By the way, call me Sam, not Samuel. Everyone does.", MOVE, JOB_CHANGE]
    mem = cold_memory
    for i, u in enumerate(users):
        mem.append_many("c", [{"role": "user", "content": u, "created_at": 1_795_000_000 + 86_400 * i},
                              {"role": "assistant", "content": "Noted.", "created_at": 1_795_000_060 + 86_400 * i}])
    facts = mem.facts("c")
    until = {f.text: f.until_position for f in facts if f.role == "user"}
    assert until["I'm Samuel Ortiz."] == 6  # the name change
    assert until["I live in Portland, Oregon"] == 8  # the move
    assert until["I work as an ER nurse at Providence Portland Medical Center."] == 10  # the job change
    assert until[FOOD] == 4  # the diet change
    assert until[MOVE] is None  # the move is current: the job change names its city only
    assert until[JOB_CHANGE] is None


def test_the_echo_of_a_diet_follows_it(cold_memory: Memory) -> None:
    """The assistant's restatement of the old diet is no current value either (before:
    it sat in the pinned current values)."""
    cold_memory.append_many("c", [{"role": "user", "content": FOOD},
                                  {"role": "assistant", "content": "Noted: fish and chicken, no red meat."},
                                  {"role": "user", "content": "Quick update: I'm vegetarian now. No more fish or chicken."},
                                  {"role": "assistant", "content": "Got it, vegetarian from now on."}])
    rows = cold_memory.cold.turns("c")
    assert [r.superseded_by for r in rows] == [2, 2, None, None]
