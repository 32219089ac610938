"""Knowledge updates end to end: a correction is current every time, questions never
supersede, echoes follow their source, and the record says what was true when."""

from __future__ import annotations

import re

import pytest

from tiermem import Memory
from tiermem.consolidation.classify import TurnClassifier
from tiermem.consolidation.supersede import Appended, Superseder, assertive_text

T0 = 1_777_600_000.0  # 2026-05-01 01:46 UTC
HOUR = 3600.0

# The seven messages (over HTTP they failed the same way).
BUDGET_CHAT = [
    ("user", "My total budget for the trip is 2,000 EUR."),
    ("assistant", "Got it, 2,000 EUR all-in."),
    ("user", "Actually, update: the total budget is now 3,200 EUR for both of us."),
    ("assistant", "Understood, 3,200 EUR for two."),
    ("user", "What about flights for the two of us now?"),
    ("assistant", "Return flights to Lisbon start around 180 EUR each."),
    ("user", "What is my total budget now?"),
]
FILLER = ["I had a long day at work.", "The weather was lovely this morning.", "My cat knocked a glass over.",
          "I finally finished that novel.", "Traffic was terrible on the bridge.", "I made pancakes today."]


def _chat(mem: Memory, conv: str, turns: list[tuple[str, str]]) -> list[int]:
    return mem.append_many(conv, [{"role": r, "content": t, "created_at": T0 + i * HOUR}
                                  for i, (r, t) in enumerate(turns)])


def _padded() -> list[tuple[str, str]]:
    """The budget chat with neutral exchanges after it, so its facts leave the tail."""
    out = list(BUDGET_CHAT[:4])
    for f in FILLER * 2:
        out += [("user", f), ("assistant", "I see.")]
    return out


def _superseded(mem: Memory, conv: str) -> dict[int, int]:
    return {r.position: r.superseded_by for r in mem.cold.turns(conv) if r.superseded_by is not None}


def test_questions_with_update_words_never_supersede(cold_memory: Memory) -> None:
    # old code: "#2 superseded by #6" and "#0 superseded by #4" (questions containing "now")
    _chat(cold_memory, "c", BUDGET_CHAT)
    sup = _superseded(cold_memory, "c")
    assert sup.get(0) == 2  # the correction supersedes the statement
    assert 2 not in sup  # the correction stays current after the questions
    assert all(new == 2 for new in sup.values())


def test_an_assistant_echo_follows_its_source(cold_memory: Memory) -> None:
    # old code: "Got it, 2,000 EUR all-in." stayed pinned under "current values"
    _chat(cold_memory, "c", _padded())
    assert _superseded(cold_memory, "c").get(1) == 2
    cold_memory.append("c", {"role": "user", "content": "What is my total budget now?"})
    cold_memory.catch_up("c")
    ctx = cold_memory.context("c", "What is my total budget now?", 300)
    lines = [ln for m in ctx.messages for ln in str(m["content"]).splitlines()]
    current = [ln for ln in lines if "superseded" not in ln.lower()]
    assert any("3,200" in ln for ln in current)
    assert not any("2,000" in ln for ln in current), current


def test_the_record_says_what_was_true_when(cold_memory: Memory) -> None:
    _chat(cold_memory, "c", BUDGET_CHAT)
    facts = {f.position: f for f in cold_memory.facts("c")}
    old, new = facts[0], facts[2]
    assert (old.status, old.until_position, old.current_position) == ("superseded", 2, 2)
    assert old.valid_from == T0 and old.until == T0 + 2 * HOUR
    assert new.status == "current" and new.until_position is None
    assert facts[1].until_position == 2  # the echo's validity ends with its source's
    assert old.to_json()["valid_until"] == {"position": 2, "time": T0 + 2 * HOUR, "superseded_by": 2}


def test_a_chain_is_followed_to_the_current_value(cold_memory: Memory) -> None:
    _chat(cold_memory, "c", [("user", "Run the dev server on port 8000."),
                             ("user", "Change the port to 8080, 8000 is taken."),
                             ("user", "Ugh, 8080 clashes too. Use port 9090 instead.")])
    facts = {f.position: f for f in cold_memory.facts("c")}
    assert [(p, facts[p].until_position, facts[p].current_position) for p in (0, 1, 2)] == [
        (0, 1, 2), (1, 2, 2), (2, None, 2)]


def test_a_retraction_ends_validity_without_a_current_value(cold_memory: Memory) -> None:
    _chat(cold_memory, "c", [("user", "Never book red-eye flights for me."),
                             ("assistant", "Understood, no red-eyes."),
                             ("user", "Forget the red-eye rule, I sleep fine on planes these days.")])
    f = {x.position: x for x in cold_memory.facts("c")}[0]
    assert (f.until_position, f.current_position) == (2, None)


def test_a_question_about_the_past_gets_the_old_value_with_its_interval(cold_memory: Memory) -> None:
    # old code: the old value was only ever "SUPERSEDED ... not current", with no interval
    _chat(cold_memory, "c", _padded())
    q = "What was my budget before I changed it?"
    cold_memory.append("c", {"role": "user", "content": q})
    cold_memory.catch_up("c")
    ctx = cold_memory.context("c", q, 300)
    text = "\n".join(str(m["content"]) for m in ctx.messages)
    line = next(ln for ln in text.splitlines() if "2,000 EUR." in ln and "trip" in ln)
    assert re.search(r"valid 01 May 2026 01:46 until 01 May 2026 03:46, then replaced", line), line
    item = next(i for i in ctx.plan.items if 0 in i.positions)
    assert "valid #0 01 May 2026 01:46 until #2 01 May 2026 03:46" in item.reason
    assert "asked about the past" in item.reason


def test_rebuild_replays_supersession_as_appends_decided_it(cold_memory: Memory) -> None:
    _chat(cold_memory, "c", BUDGET_CHAT)
    cold_memory.append_many("d", [{"role": r, "content": t} for r, t in _padded()])
    before = {c: _superseded(cold_memory, c) for c in ("c", "d")}
    assert before["c"]
    cold_memory.rebuild()
    assert {c: _superseded(cold_memory, c) for c in ("c", "d")} == before


def test_one_batch_decides_as_single_appends_do(cold_memory: Memory) -> None:
    turns = [("user", "My dentist appointment is on May 3 at 2pm."),
             ("assistant", "May 3 at 2pm, in your calendar."),
             ("user", "Is the clinic open on Saturdays now?"),
             ("user", "The dentist moved my appointment to May 6 at 4pm."),
             ("user", "Call me back on 555-0142."),
             ("user", "Use 555-0199 instead, my old phone died.")]
    _chat(cold_memory, "batch", turns)
    for i, (r, t) in enumerate(turns):
        cold_memory.append("single", {"role": r, "content": t}, created_at=T0 + i * HOUR)
    assert _superseded(cold_memory, "batch") == _superseded(cold_memory, "single") == {0: 3, 1: 3, 4: 5}


def test_a_batch_past_the_meaning_search_cap_still_supersedes_by_rules(cold_memory: Memory) -> None:
    from tiermem.consolidation.supersede import MAX_MEANING_LOOKUPS

    turns: list[tuple[str, str]] = []
    for i in range(MAX_MEANING_LOOKUPS + 20):
        turns += [("user", f"The locker code for room {i} is {1000 + i} digits."),
                  ("user", f"Actually, what about room {i} now?"),
                  ("user", f"Correction: the locker code for room {i} is {5000 + i}, not {1000 + i}.")]
    pos = _chat(cold_memory, "big", turns)
    sup = _superseded(cold_memory, "big")
    want = {pos[3 * i]: pos[3 * i + 2] for i in range(MAX_MEANING_LOOKUPS + 20)}
    assert sup == want  # every correction found its statement; no question superseded anything


# (text, assertive part): questions are removed sentence by sentence
@pytest.mark.parametrize("text,want", [
    ("What is my total budget now?", ""),  # a question alone asserts nothing
    ("Change it to Monday. Does that work?", "Change it to Monday."),  # the order stays
    ("Actually the hotel is now the Pestana Palace.", "Actually the hotel is now the Pestana Palace."),
    ('Is it "7pm?"', ""),  # a quoted question is still a question
])
def test_assertive_text(text: str, want: str) -> None:
    assert assertive_text(text) == want


# (earlier user statement, new turn, superseded?): only assertions of a new value supersede
@pytest.mark.parametrize("earlier,new,supersedes", [
    ("My budget is 2,000 EUR.", "What about flights now?", False),  # a question with "now"
    ("My budget is 2,000 EUR.", "Actually, how do flights work?", False),  # "actually" + question
    ("Should I book the Ritz?", "Actually, book the Savoy instead.", False),  # a question is never a target
    ("I'm using a Pixel 7 with Android 14.", "Now the app crashes right after login.", False),  # no new value
    ("The book club meets at Hannah's place.", "Now that I think about it, the last meeting was fun.", False),
    ("The invoice total was 480 USD.", "I'm checking my bank statement now.", False),  # narration with "now"
    # from the demo chat: narration and questions opened by "actually" / "now" / "instead"
    ("Back to Lisbon! Alfama sounds the most fun.", "Actually one more: Ines asked whether we should rent a car in "
     "Lisbon.", False),
    ("My gym, FlexFit, charged me twice this month, £39.99 both on the 1st.",
     "Adding it to my list. Now my phone contract ends next month. I pay £28 a month for 30GB.", False),
    ("They booked an engineer for Thursday between 8 and 1.", "They want next Wednesday instead of Monday.",
     False),  # the named old value (Monday) is not in the target
    ("My budget is 2,000 EUR.", "Actually, the budget is now 3,200 EUR.", True),  # a correction
    ("Please answer in Spanish.", "Switch to English instead, my colleague is reading too.", True),  # a switch
    ("Priya Shah is the billing contact.", "Priya left; the billing contact is now Tom Becker.", True),
])
def test_only_assertions_supersede(earlier: str, new: str, supersedes: bool, cold_memory: Memory) -> None:
    _chat(cold_memory, "c", [("user", earlier), ("assistant", "Noted."), ("user", new)])
    assert (_superseded(cold_memory, "c").get(0) == 2) is supersedes


def test_an_assistant_turn_never_supersedes(cold_memory: Memory) -> None:
    sup = Superseder(cold_memory.cold, None, TurnClassifier())
    assert sup.assertion(Appended(5, "assistant", "Actually, the budget is now 3,200 EUR.", "correction", True)) == ""
    assert sup.assertion(Appended(5, "user", "Actually, the budget is now 3,200 EUR.", "correction", True))


# (context lines, passes?): the demo's corrected-value check looks at how a value is presented
@pytest.mark.parametrize("lines,ok", [
    (["[user] the budget is now 3,200 EUR"], True),  # current value presented as current
    (["[user · SUPERSEDED by a later message, not current] the budget is now 3,200 EUR"], False),  # the row
    (["[user] the budget is now 3,200 EUR", "[assistant] Got it, 2,000 EUR all-in."], False),  # stale echo as current
    (["[user] the budget is now 3,200 EUR", "[user · SUPERSEDED, not current] budget 2,000 EUR"], True),
    (["[assistant] 3,200 for two replaces the 2,000 solo budget"], True),  # both in one line: the new one holds
])
def test_the_demo_checks_that_the_corrected_value_is_presented_as_current(lines: list[str], ok: bool) -> None:
    from tiermem.demo import _found

    msgs = [{"role": "user", "content": ln} for ln in lines]
    assert _found(msgs, ["3,200"], ["2,000"]) == [ok]
