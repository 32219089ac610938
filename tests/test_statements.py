"""Statement-level supersession and chains of corrections that share no words (issue 16).

A turn that states several facts, of which a later turn corrects one: the corrected
statement is never presented as current, the others stay current, the log is untouched
and the record is derived (rebuild refills it, a fork copies it, erasure removes it).
A chain whose steps share no word or slot (A, then "go with B instead", then "make it
C") is followed to its end.

On the code before (main at 91fae60) every test here that supersedes something fails:
a correction of one fact superseded the whole turn (the other fact was then shown as
"SUPERSEDED, not current" and unpinned), "make it Le Meurice" after "go with Le Bristol
instead" superseded the first statement instead of the second, a correction that matched
only a superseded value ("the HTTP client should be aiohttp") superseded nothing, and the
store had no `superseded_statements`.
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
from pathlib import Path

import pytest

from tiermem import Config, Memory
from tiermem.consolidation.classify import TurnClassifier
from tiermem.consolidation.statements import remaining_text, statement_spans
from tiermem.consolidation.supersede import Appended, Superseder
from tiermem.service import create_app
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.models import message_text

T0 = 1_777_600_000.0  # 2026-05-01 01:46 UTC
HOUR = 3600.0
FILLER = ["I had a long day at work.", "The weather was lovely this morning.", "My cat knocked a glass over.",
          "I finally finished that novel.", "Traffic was terrible on the bridge.", "I made pancakes today."]
MARKED = re.compile(r"superseded|not current", re.I)


def _chat(mem: Memory, conv: str, turns: list[tuple[str, str]], *, pad: int = 2) -> dict[int, int]:
    """Append `turns` with `pad` neutral exchanges after each user turn that no reply
    follows; returns turn index -> log position."""
    msgs: list[dict[str, object]] = []
    where: dict[int, int] = {}
    k = 0
    for i, (role, text) in enumerate(turns):
        where[i] = len(msgs)
        msgs.append({"role": role, "content": text})
        if i + 1 < len(turns) and turns[i + 1][0] == "assistant":
            continue
        for _ in range(pad):
            msgs += [{"role": "user", "content": FILLER[k % len(FILLER)]}, {"role": "assistant", "content": "I see."}]
            k += 1
    for n, m in enumerate(msgs):
        m["created_at"] = T0 + n * HOUR
    mem.append_many(conv, msgs)
    return where


def _lines(mem: Memory, conv: str, query: str, budget: int = 400) -> list[str]:
    mem.append(conv, {"role": "user", "content": query})
    ctx = mem.context(conv, query, budget, namespace_recall=False)
    return [ln for m in ctx.messages for ln in message_text(m).splitlines()
            if ln.strip() and ln.strip() != query]


def _current(lines: list[str], value: str) -> bool:
    return any(value in ln for ln in lines if not MARKED.search(ln))


# (text, statements): how a message is cut into statements
@pytest.mark.parametrize("text,want", [
    ("My flight is LH 1172 and my hotel is the Tivoli Oriente.",
     ["My flight is LH 1172", "my hotel is the Tivoli Oriente."]),  # two clauses, each with a verb
    ("Book the flight and the hotel for Friday.", ["Book the flight and the hotel for Friday."]),  # one request
    ("Emma is 7 and Leo is 4.", ["Emma is 7", "Leo is 4."]),  # a name starts the second clause
    ("We have 25 users; billing goes to finance@acme.io.", ["We have 25 users;", "billing goes to finance@acme.io."]),
    ("Target Python 3.10. Use pytest.", ["Target Python 3.10.", "Use pytest."]),  # "3.10" is not a sentence end
    ("I need milk and eggs", ["I need milk and eggs"]),  # no verb after "and"
    ("", []),  # nothing to cut
])
def test_statement_spans(text: str, want: list[str]) -> None:
    spans = statement_spans(text)
    assert [text[a:b] for a, b in spans] == want
    assert all(b1 <= a2 for (_a1, b1), (a2, _b2) in itertools.pairwise(spans))  # in order, disjoint


def test_remaining_text_cuts_only_the_gone_spans() -> None:
    text = "My flight is LH 1172 and my hotel is the Tivoli Oriente."
    (a, b), (c, d) = statement_spans(text)
    assert remaining_text(text, [(c, d)]) == "My flight is LH 1172"  # the joining "and" goes too
    assert remaining_text(text, [(a, b)]) == "my hotel is the Tivoli Oriente."
    assert remaining_text(text, []) == text


TWO_FACTS = [("user", "My flight is LH 1172 and my hotel is the Tivoli Oriente."), ("assistant", "Both saved."),
             ("user", "Actually the hotel is now the Pestana Palace.")]


def test_a_correction_of_one_fact_leaves_the_other_current(cold_memory: Memory) -> None:
    w = _chat(cold_memory, "c", TWO_FACTS)
    row = cold_memory.cold.turns_at("c", [w[0]])[0]
    assert row.superseded_by is None  # the turn still holds in part (old code: superseded by #2)
    (stmt,) = cold_memory.cold.superseded_statements("c")
    text = cold_memory.history("c")[w[0]].text
    assert text[stmt.start:stmt.end] == "my hotel is the Tivoli Oriente." and stmt.superseded_by == w[2]
    # the log is untouched
    assert text == TWO_FACTS[0][1]
    lines = _lines(cold_memory, "c", "What is my flight number?")
    assert _current(lines, "LH 1172")  # old code: only in a line marked SUPERSEDED
    assert not _current(lines, "Tivoli")  # the old hotel is never presented as current
    assert any("Tivoli" in ln and re.search(r"valid .* until .*replaced", ln) for ln in lines)


def test_the_plan_names_the_interval_of_a_superseded_statement(cold_memory: Memory) -> None:
    w = _chat(cold_memory, "c", TWO_FACTS)
    cold_memory.append("c", {"role": "user", "content": "Which hotel did I book at first?"})
    ctx = cold_memory.context("c", "Which hotel did I book at first?", 400, namespace_recall=False)
    items = [it for it in ctx.plan.items if w[0] in it.positions]
    text = TWO_FACTS[0][1]
    a = text.index("my hotel")
    # the statement, not the turn (old code: "superseded by #6 (valid #0 ..." for the whole turn)
    assert items and all(f"statement at characters {a}-{len(text)} superseded by #{w[2]} (valid #{w[0]} "
                         f"01 May 2026 01:46 until #{w[2]}" in it.reason for it in items), [it.reason for it in items]


def test_two_facts_corrected_at_different_times_each_keep_their_interval(cold_memory: Memory) -> None:
    w = _chat(cold_memory, "c", [*TWO_FACTS, ("user", "And the flight changed to LH 1180, the first was cancelled.")])
    assert cold_memory.cold.turns_at("c", [w[0]])[0].superseded_by == w[3]  # nothing of it holds now
    facts = {(f.position, f.text): f for f in cold_memory.facts("c")}
    hotel = facts[(w[0], "my hotel is the Tivoli Oriente.")]
    flight = facts[(w[0], "My flight is LH 1172")]
    assert (hotel.until_position, flight.until_position) == (w[2], w[3])
    assert hotel.until == T0 + w[2] * HOUR and flight.until == T0 + w[3] * HOUR
    assert hotel.span is not None and hotel.to_json()["span"] == {"start": hotel.span[0], "end": hotel.span[1]}
    lines = _lines(cold_memory, "c", "Which hotel did I have before?")
    # each statement is marked with its own end, not the turn's
    hotel_end = dt.datetime.fromtimestamp(T0 + w[2] * HOUR, tz=dt.UTC).strftime("%d %b %Y %H:%M")
    assert any("Tivoli" in ln and f"until {hotel_end}" in ln for ln in lines), lines


def test_the_record_is_derived_rebuild_fork_and_erasure(cold_memory: Memory) -> None:
    w = _chat(cold_memory, "c", TWO_FACTS)
    before = cold_memory.cold.superseded_statements("c")
    assert before
    cold_memory.rebuild()
    assert cold_memory.cold.superseded_statements("c") == before  # replayed from the log
    early = cold_memory.fork("c", w[2] - 1, new_id="early")  # before the correction
    late = cold_memory.fork("c", w[2], new_id="late")
    assert cold_memory.cold.superseded_statements(cold_memory.cold.key_of("default", early) or early) == []
    assert cold_memory.cold.superseded_statements(cold_memory.cold.key_of("default", late) or late) == before
    key = cold_memory.cold.key_of("default", "c")
    assert key is not None
    cold_memory.delete_conversation("c")
    assert cold_memory.cold.superseded_statements(key) == []


# (turns, expected (old, new) pairs of user turns): chains whose steps share no word or slot
CHAINS = [
    ([("user", "Let's stay at the Hotel Lutetia in Paris."), ("assistant", "Hotel Lutetia, noted."),
      ("user", "No, go with Le Bristol instead."), ("assistant", "Le Bristol it is."),
      ("user", "Hmm, make it Le Meurice, it's closer to the Louvre.")], {(0, 2), (2, 4)}),  # names only
    ([("user", "Use requests for the HTTP client."), ("assistant", "requests it is."),
      ("user", "Switch to httpx instead."), ("assistant", "Switched."),
      ("user", "On second thought, the HTTP client should be aiohttp.")], {(0, 2), (2, 4)}),  # C repeats A, not B
    ([("user", "Our account manager contact is Priya Nair."), ("assistant", "Priya Nair, noted."),
      ("user", "Priya left last week, the new contact is Tom Weber."), ("assistant", "Tom Weber."),
      ("user", "Scratch that, make it Ana Silva, Tom is on leave.")], {(0, 2), (2, 4)}),
]


@pytest.mark.parametrize("turns,want", CHAINS)
def test_a_chain_is_followed_when_its_steps_share_nothing(turns: list[tuple[str, str]], want: set[tuple[int, int]],
                                                          cold_memory: Memory) -> None:
    w = _chat(cold_memory, "c", turns)
    back = {v: k for k, v in w.items()}
    got = {(back[r.position], back[r.superseded_by]) for r in cold_memory.cold.turns("c")
           if r.superseded_by is not None and r.role == "user" and r.position in back}
    assert got == want
    # the chain's end is pinned where its start stood, even when the classifier did not
    # label it load-bearing ("On second thought, ...")
    end = cold_memory.cold.turns_at("c", [w[4]])[0]
    assert end.load_bearing and end.superseded_by is None


def test_rules_alone_follow_an_elliptical_chain(cold_memory: Memory) -> None:
    """Without the embedder (an import-sized batch decides by rules): "make it X" after a
    correction revises that correction."""
    turns, _want = CHAINS[0]
    cold_memory.append_many("c", [{"role": r, "content": t} for r, t in turns[:4]])
    rules = Superseder(cold_memory.cold, None, TurnClassifier())
    cl = TurnClassifier()
    text = turns[4][1]
    lab = cl.classify(text, "user")
    cold_memory.cold.set_superseded("c", [(0, 2)])  # the earlier step, as recorded
    pairs, rows = rules.decide("c", [Appended(4, "user", text, lab.intent, lab.load_bearing)])
    assert pairs == [(2, 4), (3, 4)] and rows == []  # the correction and its echo "Le Bristol it is."


# (earlier, later): turns that look like an update of one fact of several, and are not
@pytest.mark.parametrize("earlier,later", [
    ("Book a table for four at Nopi on Friday.", "Make it quick, I'm in a meeting soon."),  # a manner, not a value
    ("The repo uses Poetry and the CI runs on GitHub Actions.", "Also, the CI now needs a Windows runner too."),
    ("I'm vegan and I'm allergic to sesame.", "Is the tahini dressing now safe for me, or should I change it?"),
    ("My dentist appointment is Thursday at 3pm.", "I'll go with Maya, she has a car."),  # "go with" a person
])
def test_look_alikes_supersede_nothing(earlier: str, later: str, cold_memory: Memory) -> None:
    _chat(cold_memory, "c", [("user", earlier), ("assistant", "Noted."), ("user", later)])
    assert not [r for r in cold_memory.cold.turns("c") if r.superseded_by is not None]
    assert cold_memory.cold.superseded_statements("c") == []


def test_a_partial_echo_follows_only_the_superseded_value(cold_memory: Memory) -> None:
    w = _chat(cold_memory, "c", [("user", "Ship it to 14 Harcourt Road, Dublin. My phone is 555-0142."),
                                 ("assistant", "Shipping to 14 Harcourt Road; phone 555-0142."),
                                 ("user", "Sorry, the phone number is wrong: it's 555-0199.")])
    got = {(s.position, s.superseded_by) for s in cold_memory.cold.superseded_statements("c")}
    assert got == {(w[0], w[2]), (w[1], w[2])}
    lines = _lines(cold_memory, "c", "Where do you ship it?")
    assert _current(lines, "14 Harcourt Road") and not _current(lines, "555-0142")


def test_a_later_partial_correction_ends_the_epoch_that_showed_the_turn(cold_memory: Memory) -> None:
    w = _chat(cold_memory, "c", TWO_FACTS[:2])
    cold_memory.append("c", {"role": "user", "content": "Which hotel am I in?"})
    first = cold_memory.context("c", "Which hotel am I in?", 400, namespace_recall=False)
    assert any(w[0] in it.positions for it in first.plan.items)
    cold_memory.append("c", {"role": "user", "content": TWO_FACTS[2][1]})
    cold_memory.append("c", {"role": "user", "content": "Which hotel am I in now?"})
    second = cold_memory.context("c", "Which hotel am I in now?", 400, namespace_recall=False)
    assert second.plan.cache.new_epoch
    lines = [ln for m in second.messages for ln in message_text(m).splitlines()]
    assert not _current(lines, "Tivoli")


def test_facts_over_http_list_a_turn_statement_by_statement(tmp_path: Path, embedder: FastEmbedder
                                                            ) -> None:
    from fastapi.testclient import TestClient

    cfg = Config(data_dir=tmp_path / "data")
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        w = _chat(mem, "trip", TWO_FACTS)
        app = create_app(cfg, mem, auth=False, namespace="default", start_scheduler=False)
        with TestClient(app, base_url="http://127.0.0.1") as c:
            got = [f for f in c.get("/v1/conversations/trip/facts").json()["facts"] if f["position"] == w[0]]
    text = TWO_FACTS[0][1]
    a = text.index("my hotel")
    assert [(f["text"], f["status"], f["span"]) for f in got] == [
        ("My flight is LH 1172", "current", {"start": 0, "end": len("My flight is LH 1172")}),
        ("my hotel is the Tivoli Oriente.", "superseded", {"start": a, "end": len(text)})]
    assert got[1]["valid_until"]["superseded_by"] == w[2]


def test_the_locomo_check_counts_a_turn_shown_in_parts_as_shown(cold_memory: Memory) -> None:
    """The LoCoMo harness drops a position whose text is not in the context verbatim; a
    turn corrected in part is shown split (what holds, then the marked statement), and
    counts as shown when every part is there (without this, conv-26 recall at 2,000
    tokens read 90.4% for 92.1%: 66 positions dropped)."""
    from tiermem.evals.baselines import tiermem_context, verify_positions

    w = _chat(cold_memory, "c", TWO_FACTS)
    cold_memory.append("c", {"role": "user", "content": "Where am I staying and what is my flight?"})
    out = tiermem_context(cold_memory, "c", "Where am I staying and what is my flight?", 400, namespace="default")
    assert w[0] in out.positions
    assert verify_positions(cold_memory, "c", out) == 0 and w[0] in out.positions
