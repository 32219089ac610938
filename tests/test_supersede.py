"""Supersession: corrections and retractions find the earlier turn they replace, or nothing."""

from __future__ import annotations

import numpy as np
import pytest

from tiermem.consolidation.classify import TurnClassifier
from tiermem.consolidation.supersede import Candidate, detect_slots, find_superseded
from tiermem.evals.classifier_eval import load_supersede_cases

CLF = TurnClassifier()


def _cands(texts: list[str]) -> list[Candidate]:
    out = []
    for pos, t in enumerate(texts):
        lab = CLF.classify(t, "user")
        out.append(Candidate(pos, t, lab.intent, lab.load_bearing))
    return out


# (earlier user turns, correction, expected superseded position or None)
TABLE: list[tuple[list[str], str, int | None]] = [
    # slot-style: a weekday replaces a weekday
    (["Book me a flight to Denver on Tuesday.", "I need an aisle seat."], "Actually, make it Wednesday.", 0),
    # an entity named in a "no longer" statement
    (["I work at Acme as an analyst.", "My manager is Priya."], "I don't work at Acme anymore.", 0),
    # a shared content word
    (
        ["My budget for the hotel is $200 a night.", "Near the old town please."],
        "Change the budget to $500.",
        0,
    ),
    (["Find me a hotel near the river.", "No red-eyes please."], "Forget what I said about the hotel.", 0),
    # bare retraction: the immediately previous load-bearing turn
    (["Always answer in French.", "Use metric units."], "scratch that", 1),
    (["Set the meeting for 3pm.", "Invite Dana and Luis."], "Never mind.", 1),
    # a time replaces a time, not the later turn without one
    (["Schedule the call for 10am.", "Send the agenda to the team."], "Actually make it 11:30.", 0),
    # numbers match on their unit
    (["Set the thermostat to 68 degrees.", "Turn off the porch light at 11pm."], "No wait, 70 degrees.", 0),
    # the old value named after "not" / "instead of"
    (["Book the 7:40pm flight.", "Send me the itinerary."], "Actually no, not the 7:40, the 9:05 one.", 0),
    (
        ["Use Postgres for the database.", "Deploy on Fly.io."],
        "Actually let's go with MySQL instead of Postgres.",
        0,
    ),
    (
        ["I'm allergic to peanuts.", "We're going to Lisbon in May."],
        "Actually the trip is to Porto, not Lisbon.",
        1,
    ),
    # a place replaces a place
    (["I live in Portland.", "My office is downtown."], "I moved to Seattle last month.", 0),
    # a language replaces a language even when another turn shares a word
    (
        ["Always answer in French.", "Keep answers under 100 words."],
        "Answer in English from now on instead.",
        0,
    ),
    # retraction with an object that matches nothing falls back to the previous instruction
    (
        ["Add a docstring to the module.", "Rename list_orders to get_orders."],
        "scratch that, keep the old name",
        1,
    ),
    # null: not a correction at all
    (["Always run ruff before committing.", "Use type hints everywhere."], "What's the weather like?", None),
    (["The deadline is Friday.", "The client is Finch Labs."], "Thanks, that's helpful!", None),
    # null: "actually" that adds something
    (["Book the 9am flight.", "I need a hotel near the venue."], "Actually, I also need a rental car.", None),
    # null: a new constraint is not a correction
    (
        ["Send the report to Luis.", "Include the Q3 numbers."],
        "I don't want any numbers from Q2 in there.",
        None,
    ),
    # null: nothing earlier to retract
    ([], "scratch that", None),
    (["What time does the pharmacy close?", "Is it open on Sunday?"], "never mind", None),
    # null: the named old value is not in view, and one shared generic word is not enough
    (["I work from home on Fridays.", "Book the team lunch."], "I don't work at Globex anymore.", None),
    # null: a bare slot match never revises a turn that is not load-bearing
    (
        ["Traffic was awful on Friday.", "Where is the nearest pharmacy?"],
        "Actually, make it Wednesday.",
        None,
    ),
    # null: a slot correction with no earlier turn of that slot type
    (["I need an aisle seat.", "Please send the itinerary by email."], "Actually, make it Wednesday.", None),
]


@pytest.mark.parametrize(("earlier", "correction", "expected"), TABLE, ids=[t[1][:40] for t in TABLE])
def test_table(earlier: list[str], correction: str, expected: int | None) -> None:
    got = find_superseded(correction, _cands(earlier))
    if expected is None:
        assert got == []
    else:
        assert [p for p, _ in got] == [expected], got
        assert got[0][1]  # a reason is always given


def test_reason_says_why() -> None:
    got = find_superseded(
        "Actually the trip is to Porto, not Lisbon.",
        _cands(["I'm allergic to peanuts.", "We fly to Lisbon."]),
    )
    assert got and "old value 'lisbon'" in got[0][1]


def test_prefers_most_recent_matching_turn() -> None:
    earlier = ["Book the hotel for Tuesday.", "Remind me to pack.", "Actually move the hotel to Thursday."]
    got = find_superseded("No wait, make the hotel Friday.", _cands(earlier))
    assert [p for p, _ in got] == [2]


def test_questions_and_chitchat_are_never_superseded() -> None:
    earlier = ["What's the budget for the hotel?", "lol ok"]
    assert find_superseded("Change the budget to $500.", _cands(earlier)) == []


def test_embedding_similarity_can_decide() -> None:
    # Orthogonal except for the target: similarity alone picks turn 0.
    e0 = np.array([1.0, 0.0, 0.0], dtype=np.float32)
    e1 = np.array([0.0, 1.0, 0.0], dtype=np.float32)
    q = np.array([0.9, 0.1, 0.0], dtype=np.float32)
    cands = [
        # no place named by its name alone (which "the restaurant" may be: _named_venue)
        Candidate(0, "Book a table for Friday.", "instruction", True, e0),
        Candidate(1, "Book the Altis hotel from Friday to Monday.", "instruction", True, e1),
    ]
    assert find_superseded("Forget the restaurant.", cands) == []  # no lexical evidence
    got = find_superseded("Forget the restaurant.", cands, embedding=q)
    assert [p for p, _ in got] == [0] and "sim=" in got[0][1]


def test_slot_detectors() -> None:
    s = detect_slots("Book 4 people at Eem on Friday the 12th at 7:30pm for $200 in Lisbon, size medium.")
    assert s["weekday"] == {"friday"}
    assert s["time"] == {"7:30pm"}
    assert s["date"] == {"12th"}
    assert s["money"] == {"$200"}
    assert "4 people" in s["number"]
    assert "lisbon" in s["place"]
    assert "medium" in s["size"]
    assert detect_slots("Reach me at dana@example.com or 555-0142")["email"] == {"dana@example.com"}


def test_eval_cases_accuracy_rules_only() -> None:
    cases = load_supersede_cases()
    assert len(cases) >= 30
    correct = wrong = 0
    for case in cases:
        got = find_superseded(case["correction"], _cands(case["earlier"]))
        pred = got[0][0] if got else None
        if pred == case["expected"]:
            correct += 1
        elif pred is not None:
            wrong += 1
    assert correct / len(cases) >= 0.9
    assert wrong == 0  # precision: never supersede the wrong turn on the labelled cases


SMALL_TALK = ["What's a good podcast about volcanoes?", "Ugh, the weather here is windy again.",
              "How long should I cook potatoes for dinner tonight?", "Tell me a fun fact about coral reefs."]


def _chat(mem, conv: str, users: list[str]) -> None:  # type: ignore[no-untyped-def]
    for u in users:
        mem.append_many(conv, [{"role": "user", "content": u}, {"role": "assistant", "content": "Noted."}])


def test_a_correction_finds_a_plain_statement_far_back_past_small_talk_on_its_topic(cold_memory) -> None:  # type: ignore[no-untyped-def]
    # the value is a plain statement (not pinned) 60 exchanges back; small talk that shares
    # its topic word sits inside the recent window, where the rules would otherwise look
    _chat(cold_memory, "c", ["Seat preference: aisle seat, every time."])
    _chat(cold_memory, "c", SMALL_TALK * 15)
    _chat(cold_memory, "c", ["My cousin is picky about airplane seats too, funny how that runs in families."])
    _chat(cold_memory, "c", ["Switch my seat preference to window seat."])
    last = cold_memory.cold.last_position("c") - 1
    rows = {r.position: r for r in cold_memory.cold.turns("c", start=0, end=last)}
    assert rows[0].superseded_by == last
    assert all(r.superseded_by is None for p, r in rows.items() if p not in (0, last))


def test_an_update_prefers_the_instruction_to_small_talk_a_hair_closer(cold_memory) -> None:  # type: ignore[no-untyped-def]
    _chat(cold_memory, "c", ["We're standardizing on CockroachDB, don't suggest any other database."])
    _chat(cold_memory, "c", ["We had a long meeting about databases at work today, pretty boring honestly.",
                             *SMALL_TALK] * 3)
    _chat(cold_memory, "c", ["We switched: the database is MySQL from now on."])
    last = cold_memory.cold.last_position("c") - 1
    rows = {r.position: r for r in cold_memory.cold.turns("c", start=0, end=last)}
    assert rows[0].superseded_by == last
    assert [p for p, r in rows.items() if r.superseded_by is not None] == [0]
