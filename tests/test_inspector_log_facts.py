"""The Log page's validity column: the facts of its rows only (`Memory.facts(start=, end=)`).

Before, `turns_page` called `mem.facts(name)`, which reads every turn and the text of
every load-bearing user turn of the conversation, to fill in 50 rows (and the pin POST
renders through it too): 7.6 ms at 500 turns, 184 ms at 5,000, 613 ms at 20,000.

Invariants:
- `facts(start=a, end=b)` is the whole conversation's `facts()` at positions a..b, entry
  for entry: a chain of corrections that runs past the range (A -> B -> C), a retraction
  that ends one, a turn of two facts of which one is corrected, a popped correction and a
  popped link of a chain are read as the whole list reads them.
- The Log page shows, for each of its rows, what the whole list says of that position.
- It reads its rows and the chains they start, never the rest of the log: a message the
  whole list would read (a load-bearing statement on an earlier page) is not read, shown
  by the store's salvage counter over messages that cannot be decoded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from test_cold_salvage import corrupt

from tiermem import Config, Memory
from tiermem.inspector import data
from tiermem.service import create_app
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.formats import RETRACT_TYPE

T0 = 1_777_600_000.0
HOUR = 3600.0
FILLER = ["I had a long day at work.", "The weather was lovely this morning.", "My cat knocked a glass over.",
          "I finally finished that novel.", "Traffic was terrible on the bridge.", "I made pancakes today."]
WINDOW = 3  # positions a range covers: shorter than the padding, so chains run past it


def _chat(mem: Memory, conv: str, turns: list[tuple[str, str]], pad: int = 2) -> dict[int, int]:
    """Append `turns` with `pad` neutral exchanges after each user turn no reply follows;
    turn index -> log position."""
    msgs: list[dict[str, Any]] = []
    where: dict[int, int] = {}
    for i, (role, text) in enumerate(turns):
        where[i] = len(msgs)
        msgs.append({"role": role, "content": text})
        if i + 1 < len(turns) and turns[i + 1][0] == "assistant":
            continue
        for k in range(pad):
            msgs += [{"role": "user", "content": FILLER[(i + k) % len(FILLER)]},
                     {"role": "assistant", "content": "I see."}]
    for n, m in enumerate(msgs):
        m["created_at"] = T0 + n * HOUR
    mem.append_many(conv, msgs)
    mem.catch_up(conv)
    return where


def _pop(mem: Memory, conv: str, position: int) -> None:
    mem.append(conv, {"type": RETRACT_TYPE, "position": position})
    mem.catch_up(conv)


BUDGET = [("user", "My total budget for the trip is 2,000 EUR."), ("assistant", "Got it, 2,000 EUR all-in."),
          ("user", "Actually, update: the total budget is now 3,200 EUR for both of us."),
          ("assistant", "Understood, 3,200 EUR for two.")]
PORTS = [("user", "Run the dev server on port 8000."), ("user", "Change the port to 8080, 8000 is taken."),
         ("user", "Ugh, 8080 clashes too. Use port 9090 instead.")]
RED_EYE = [("user", "Never book red-eye flights for me."), ("assistant", "Understood, no red-eyes."),
           ("user", "Forget the red-eye rule, I sleep fine on planes these days.")]
TWO_FACTS = [("user", "My flight is LH 1172 and my hotel is the Tivoli Oriente."), ("assistant", "Both saved."),
             ("user", "Actually the hotel is now the Pestana Palace.")]
PHONE = [("user", "My phone number is 555-1111."), ("assistant", "Noted."),
         ("user", "Actually, my new number is 555-2222.")]


# (case id, turns, index of the turn to pop afterwards or None)
CONVERSATIONS = [
    ("correction", BUDGET, None),  # a fact and its correction, the echo following its source
    ("chain", PORTS, None),  # A -> B -> C: the ranges of A and B end past themselves
    ("retraction", RED_EYE, None),  # a chain ended without a current value
    ("one-of-two-facts", TWO_FACTS, None),  # statement by statement: the turn holds in part
    ("popped-correction", PHONE, 2),  # the old value current again
    ("popped-link", PORTS, 1),  # A -> B -> C with B popped reads A -> C
]


@pytest.mark.parametrize(("turns", "pop"), [c[1:] for c in CONVERSATIONS], ids=[c[0] for c in CONVERSATIONS])
def test_the_facts_of_a_range_are_the_whole_lists_at_its_positions(cold_memory: Memory, turns: list[tuple[str, str]],
                                                                   pop: int | None) -> None:
    where = _chat(cold_memory, "c", turns)
    if pop is not None:
        _pop(cold_memory, "c", where[pop])
    whole = cold_memory.facts("c")
    assert any(v.until_position is not None for v in whole) or pop is not None, whole
    last = cold_memory.cold.last_position(cold_memory.cold.key_of("default", "c") or "")
    crossing = 0
    for a in range(last + 1):
        b = a + WINDOW - 1
        got = cold_memory.facts("c", start=a, end=b)
        assert got == [v for v in whole if a <= v.position <= b], (a, b)
        crossing += sum(1 for v in got if any(p is not None and p > b for p in (v.until_position, v.current_position)))
    assert cold_memory.facts("c", start=0, end=None) == whole
    # some range holds an entry whose chain ends past it (what a range must follow)
    assert crossing > 0 or pop == 2


# load-bearing statements (the classifier's labels) that correct nothing
STANDING = ["I am allergic to peanuts.", "I am vegetarian.", "Always send invoices to finance@acme.io.",
            "Never book red-eye flights for me."]


def _long_conversation(mem: Memory, name: str, pages: int) -> tuple[int, int]:
    """`pages` Log pages: a fact on the first, filler, its correction on the last; the
    fact's and the correction's positions."""
    n = pages * data.TURNS_PER_PAGE - 4
    msgs: list[dict[str, Any]] = [{"role": "user", "content": BUDGET[0][1]}, {"role": "assistant", "content": BUDGET[1][1]}]
    for i in range(1, n // 2):
        msgs += [{"role": "user", "content": STANDING[i % len(STANDING)]},
                 {"role": "assistant", "content": "Noted."}]
    msgs += [{"role": "user", "content": BUDGET[2][1]}, {"role": "assistant", "content": BUDGET[3][1]}]
    got = mem.append_many(name, msgs)
    mem.catch_up(name)
    return got[0], got[-2]


def test_the_log_page_shows_the_whole_lists_validity_and_reads_only_its_rows(tmp_path: Path,
                                                                            embedder: FastEmbedder) -> None:
    cfg = Config(data_dir=tmp_path / "data")
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        fact, correction = _long_conversation(mem, "trip", 3)
        whole = {v.position: v.to_json() for v in mem.facts("trip")}
        assert whole[fact]["valid_until"]["superseded_by"] == correction  # the chain crosses the pages
        pages = data.turns_page(mem, "default", "trip", None).pages
        assert pages == 3
        for page in range(pages):
            rows = data.turns_page(mem, "default", "trip", page).rows
            assert [r.validity for r in rows] == [whole.get(r.position) for r in rows]
        key = mem.cold.key_of("default", "trip")
        assert key is not None
        first = [p for p in range(data.TURNS_PER_PAGE) if p % 2 == 0]  # the first page's user turns
        bearing = {r.position for r in mem.cold.turns_at(key, first) if r.load_bearing}
        assert len(bearing) > 1, "the first page has load-bearing statements the whole list reads"
    for p in first:
        corrupt(cfg.db_path, key, p)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        app = create_app(cfg, mem, auth=False, start_scheduler=False)
        with TestClient(app, raise_server_exceptions=False, base_url="http://127.0.0.1") as client:
            before = mem.stats(namespace="default")["cold"]["salvaged_rows"]
            r = client.get("/ui/c/trip")  # the last page, where the correction is
            assert r.status_code == 200, r.text
            pin = client.post("/ui/c/trip/pins", json={"position": correction, "pinned": True},
                              headers={"HX-Request": "true"})
            assert pin.status_code == 200, pin.text
            read = mem.stats(namespace="default")["cold"]["salvaged_rows"] - before
            assert read == 0, f"the Log page read {read} messages of the first page"
            mem.facts("trip")  # the whole list does read them: the counter sees it
            assert mem.stats(namespace="default")["cold"]["salvaged_rows"] - before >= len(bearing)
