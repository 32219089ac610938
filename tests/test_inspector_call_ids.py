"""The Log pairs each tool call with the result that answers it as the library does
(`tiermem.inspector.data.pair_results`, `tiers.formats.SentCallIds`), not by id alone.

Servers that number calls per reply send `call_0` every round: the Log showed a later
round's call with the first round's result ("weather(Lisbon) -> #2: Oslo").

Invariants:
- A result answers a call of its id in the round just before it; the n-th result of an
  id in a round its n-th call (Responses items of one round may share a `call_id`). A
  chat assistant message starts a round: a result after the model's next turn answers
  none of the calls before it.
- A call no result answers shows none, even when a later round's call of its id has one.
- Paging changes nothing: a call on one page with its result on the next keeps it (the
  lookahead), and a call before the page takes its result there (the look-behind), so a
  row on the page never shows a result an earlier call took.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tiermem import Config, Memory
from tiermem.inspector import data
from tiermem.tiers.embed_onnx import FastEmbedder

CONV = "tools"


def _call(cid: str, city: str) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": cid, "type": "function", "function": {"name": "weather", "arguments": json.dumps({"city": city})}}]}


def _result(cid: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "content": text}


def _item_call(cid: str, city: str) -> dict[str, Any]:
    return {"type": "function_call", "call_id": cid, "name": "weather", "arguments": json.dumps({"city": city})}


def _item_result(cid: str, text: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": cid, "output": text}


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def _filler(n: int) -> list[dict[str, Any]]:
    """`n` plain messages, user and assistant in turn, starting with a user's."""
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"small talk {i}"} for i in range(n)]


LAST_ON_FIRST_PAGE = data.TURNS_PER_PAGE - 1

# (case id, messages, {call position: its result's position, or None for no result})
CASES = [
    # the reviewer's: call_0 for Oslo, then call_0 again for Lisbon in the next round
    ("id-reused-next-round",
     [_user("Weather in Oslo?"), _call("call_0", "Oslo"), _result("call_0", "Oslo: -5 C"),
      {"role": "assistant", "content": "Snowy."}, _user("And Lisbon?"), _call("call_0", "Lisbon"),
      _result("call_0", "Lisbon: 18 C"), {"role": "assistant", "content": "Sunny."}],
     {1: 2, 5: 6}),
    # a call never answered, its id reused by the next round's call, which is answered
    ("unanswered-then-reused",
     [_user("Weather in Oslo?"), _call("call_0", "Oslo"), _user("Never mind, Lisbon."),
      _call("call_0", "Lisbon"), _result("call_0", "Lisbon: 18 C")],
     {1: None, 3: 4}),
    # the model's next turn before the result: a new round, as the library reads it
    # (`unique_chat_call_ids`), so the result answers no call shown
    ("a-reply-before-the-result",
     [_user("Start the export."), _call("exp_1", "export"), {"role": "assistant", "content": "Working on it."},
      _user("Thanks."), _result("exp_1", "export done: 42 rows")],
     {1: None}),
    # Responses items: two parallel calls of one id, answered in order
    ("one-id-twice-in-a-round",
     [_user("Oslo and Lisbon?"), _item_call("call_0", "Oslo"), _item_call("call_0", "Lisbon"),
      _item_result("call_0", "Oslo: -5 C"), _item_result("call_0", "Lisbon: 18 C")],
     {1: 3, 2: 4}),
    # the last row of the first page calls, its result opens the next page; the id comes
    # again on the next page
    ("result-on-next-page",
     [*_filler(LAST_ON_FIRST_PAGE), _call("call_0", "Oslo"), _result("call_0", "Oslo: -5 C"),
      _user("And Lisbon?"), _call("call_0", "Lisbon"), _result("call_0", "Lisbon: 18 C")],
     {LAST_ON_FIRST_PAGE: LAST_ON_FIRST_PAGE + 1, LAST_ON_FIRST_PAGE + 3: LAST_ON_FIRST_PAGE + 4}),
    # a round of two calls of one id across the page break: the one before the page takes
    # the first result, the page's row the second
    ("round-across-the-page-break",
     [*_filler(LAST_ON_FIRST_PAGE), _item_call("call_0", "Oslo"), _item_call("call_0", "Lisbon"),
      _item_result("call_0", "Oslo: -5 C"), _item_result("call_0", "Lisbon: 18 C")],
     {LAST_ON_FIRST_PAGE: LAST_ON_FIRST_PAGE + 2, LAST_ON_FIRST_PAGE + 1: LAST_ON_FIRST_PAGE + 3}),
]


@pytest.mark.parametrize(("messages", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_call_shows_the_result_that_answers_it(tmp_path: Path, embedder: FastEmbedder,
                                                    messages: list[dict[str, Any]],
                                                    expected: dict[int, int | None]) -> None:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        mem.append_many(CONV, messages)
        rows = {}
        for page in range(data.turns_page(mem, "default", CONV, None).pages):
            rows.update({t.position: t for t in data.turns_page(mem, "default", CONV, page).rows})
        assert sorted(rows) == list(range(len(messages)))  # every row on one page exactly
        shown = {p: rows[p].tool_calls[0].result_position for p in expected}
        assert shown == expected
        for p, r in expected.items():  # the text shown is that result's
            assert rows[p].tool_calls[0].result == (None if r is None else rows[r].text)
