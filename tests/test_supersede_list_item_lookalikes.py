"""False supersessions a reviewer found (s36, rv_know) and the corrections beside them that
must still supersede, each through the real Memory (rules and the meaning search):

- a correction of one item of a list ("I'm not allergic to latex after all.") leaves the
  list's statement current ("I'm allergic to penicillin and latex.": the penicillin allergy
  still holds; the correction is in view beside it), where before the whole statement was
  shown SUPERSEDED; a correction naming every item, restating the list, or dropping
  nothing still revises it;
- who a correction reports ("Linda said the offsite is moved to Tuesday.") is no evidence
  of the statement naming them ("My manager is Linda."), by words or by meaning;
- another person's habit ("My dad doesn't eat beef anymore.") revises no diet of the
  user's ("I don't eat pork."), and still revises the same person's;
- an amount for another thing ("My budget for the new phone is $700.") revises no budget
  for a thing it never names ("... for the new laptop", "The monthly grocery budget").
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tiermem import Memory
from tiermem.config import Config

START = 1_777_600_000.0  # a fixed clock: 2026-05-01
TURN_SECONDS = 600.0  # ten minutes between turns
FILLER = [("I had a long day at work.", "Sorry to hear that."),
          ("The weather is lovely today.", "Enjoy it!")]


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    data: Path = tmp_path_factory.mktemp("lookalikes")
    with Memory(Config(data_dir=data), hot=False, background_indexing=False) as mem:
        yield mem


def superseded(mem: Memory, conv: str, before: str, after: str) -> bool:
    """Whether `after` ended `before` (its first user turn), with small talk between."""
    msgs = [{"role": "user", "content": before}, {"role": "assistant", "content": "Noted."}]
    for u, a in FILLER:
        msgs += [{"role": "user", "content": u}, {"role": "assistant", "content": a}]
    new = len(msgs)
    msgs += [{"role": "user", "content": after}, {"role": "assistant", "content": "Noted."}]
    for n, m in enumerate(msgs):
        m["created_at"] = START + n * TURN_SECONDS
    mem.append_many(conv, msgs)
    mem.catch_up(conv)
    return any(v.position == 0 and v.until_position == new for v in mem.facts(conv))


# (before, after, whether after supersedes before)
CASES = [
    # one item of a list dropped: the rest still holds (superseded whole before)
    ("I'm allergic to penicillin and latex.", "I'm not allergic to latex after all.", False),
    ("I'm vegetarian and gluten-free.", "I'm no longer gluten-free.", False),
    ("I'm allergic to penicillin, latex and bee stings.", "I'm not allergic to latex.", False),
    # the reporter's name is all the two share (superseded before, by meaning)
    ("My manager is Linda.", "Linda said the offsite is moved to Tuesday.", False),
    ("My manager is Linda.", "Linda said the quarterly review moved to Tuesday.", False),
    # another person's habit (superseded before: "my dad" read as nobody's)
    ("I don't eat pork.", "My dad doesn't eat beef anymore.", False),
    # another thing's budget (superseded before: the slot and "budget" shared)
    ("My budget for the new laptop is $1,200.", "My budget for the new phone is $700.", False),
    ("The monthly grocery budget is $600.", "My budget for the new phone is $700.", False),
    # guards: still corrections
    ("I'm allergic to penicillin.", "I'm not allergic to penicillin after all; it was amoxicillin.", True),
    ("I'm allergic to penicillin and latex.", "I'm not allergic to penicillin or latex after all.", True),  # every item
    ("My budget for the new laptop is $1,200.", "Actually, let's cap the laptop budget at $900.", True),
    ("My manager is Linda.", "Linda left; my new manager is Raj.", True),  # the name and the slot
    ("My dad eats fish.", "My dad doesn't eat fish anymore.", True),  # the same person's habit
    ("I eat fish.", "I don't eat fish anymore.", True),  # the user's own
    ("I'm vegetarian.", "I started eating fish again, so I'm pescatarian now.", True),
    ("My sister lives in Oslo.", "My sister moved from Oslo to Bergen.", True),
    ("I live in Leeds with my wife and kids.", "I moved to York with my wife.", True),  # no item dropped
    ("My budget for the trip is $3,000.", "My budget for the trip is now $2,500.", True),  # the same thing
    # a negation that gives a value of its own is a correction, list or no list (d12150d
    # missed each: a review's regressions)
    ("I live in Bosnia and Herzegovina.", "I don't live in Bosnia anymore, I moved to Croatia.", True),
    ("I'm 30 and a nurse.", "I'm not a nurse anymore, I'm a paramedic now.", True),
    ("I drive a Honda and my wife drives a Toyota.",
     "I don't drive the Honda anymore, I sold it and bought a Tesla.", True),
    ("I have two kids, Sam and Leo.", "Not two kids anymore, we have three now.", True),
    ("I'm allergic to penicillin and latex.", "Actually it's amoxicillin, not penicillin.", True),
    # a report about the reporter is whose fact it is (d12150d dropped the name as evidence)
    ("My son Leo is 9.", "Leo says he's 10 now.", True),
    ("My sister Anna is a lawyer.", "Anna told me she quit law and is a chef now.", True),
]


@pytest.mark.parametrize(("before", "after", "expected"), CASES)
def test_supersedes_only_what_the_correction_revises(memory: Memory, before: str, after: str,
                                                     expected: bool) -> None:
    conv = f"c{CASES.index((before, after, expected))}"
    assert superseded(memory, conv, before, after) is expected
