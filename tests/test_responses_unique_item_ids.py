"""The Responses form sends each call and output item's `id` once: where a call id is
renamed (tiers.formats, "Ids sent": `call_0` again goes out as `call_0_2`) and its item
carries an id an earlier item of the request holds, the repeat goes without one (the
`openai` SDK's `ResponseFunctionToolCallParam.id` and the output's are optional, "The
unique ID"); the pairing is the `call_id`'s, which stays renamed as before.

Fails on the code before: a server that numbers its items per reply as it numbers its
calls (the item id the call id itself, `call_0`, or `fc_0` every round) had its second
round's call renamed to `call_0_2` while its item kept the id `call_0` (or `fc_0`), so
two input items shared an id, which the Responses API refuses ("Duplicate item found
with id ... Remove duplicate items from your input", openai-agents-python#1789). Through
`to_responses` over an `as_stored` context, `context_format="responses"` and the Agents
SDK session's `get_items` alike."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from call_history import BUDGET, ask
from provider_rules import responses_problems
from sdk_corpus import valid_responses

from tiermem import Config, Memory
from tiermem.adapters.openai_agents import TiermemSession
from tiermem.tiers.embed import Embedder
from tiermem.tiers.formats import to_responses


def call(cid: str, item_id: str | None, n: int) -> dict[str, Any]:
    """A function_call item under `cid`, with the item id `item_id` (None: no id key)."""
    item: dict[str, Any] = {"type": "function_call", "call_id": cid, "name": "lookup", "arguments": f'{{"n": {n}}}'}
    return item if item_id is None else {**item, "id": item_id}


def output(cid: str, item_id: str | None, text: str) -> dict[str, Any]:
    item: dict[str, Any] = {"type": "function_call_output", "call_id": cid, "output": text}
    return item if item_id is None else {**item, "id": item_id}


def rounds(*pairs: tuple[dict[str, Any], dict[str, Any]]) -> list[dict[str, Any]]:
    """One round per (call, output) pair, each asked for and answered."""
    return [row for r, (c, o) in enumerate(pairs) for row in (ask(f"weather {r}?"), c, o)] + [ask("thanks")]


# each case: a log, and the (call_id, item id or None) of every call and output item in
# request order, in the Responses form
CASES: list[tuple[str, list[dict[str, Any]], list[tuple[str, str | None]]]] = [
    # the item id is the call id itself, call_0 every round: the renamed repeat goes without it
    ("item id = call id, two rounds",
     rounds((call("call_0", "call_0", 0), output("call_0", None, "one")),
            (call("call_0", "call_0", 1), output("call_0", None, "two"))),
     [("call_0", "call_0"), ("call_0", None), ("call_0_2", None), ("call_0_2", None)]),
    # ... and in three rounds, each later one without it
    ("item id = call id, three rounds",
     rounds(*[(call("call_0", "call_0", n), output("call_0", None, str(n))) for n in range(3)]),
     [("call_0", "call_0"), ("call_0", None), ("call_0_2", None), ("call_0_2", None),
      ("call_0_3", None), ("call_0_3", None)]),
    # item ids numbered per reply too (fc_0 every round), outputs with ids of their own
    ("fc_0 and fco_0 every round",
     rounds((call("call_0", "fc_0", 0), output("call_0", "fco_0", "one")),
            (call("call_0", "fc_0", 1), output("call_0", "fco_0", "two"))),
     [("call_0", "fc_0"), ("call_0", "fco_0"), ("call_0_2", None), ("call_0_2", None)]),
    # one round, two calls of c1 in items sharing an id: the second pair renamed, its id left out
    ("one round, two calls of c1 under one item id",
     [ask("go"), call("c1", "fc_1", 1), call("c1", "fc_1", 2), output("c1", None, "a"), output("c1", None, "b"),
      ask("thanks")],
     [("c1", "fc_1"), ("c1_2", None), ("c1", None), ("c1_2", None)]),
    # a renamed call whose item id is its own keeps it (passes before and after)
    ("renamed, item ids unique",
     rounds((call("call_0", "fc_a", 0), output("call_0", None, "one")),
            (call("call_0", "fc_b", 1), output("call_0", None, "two"))),
     [("call_0", "fc_a"), ("call_0", None), ("call_0_2", "fc_b"), ("call_0_2", None)]),
    # fresh call ids and item ids: sent as stored (passes before and after)
    ("fresh ids",
     rounds((call("call_a", "fc_a", 0), output("call_a", "fco_a", "one")),
            (call("call_b", "fc_b", 1), output("call_b", "fco_b", "two"))),
     [("call_a", "fc_a"), ("call_a", "fco_a"), ("call_b", "fc_b"), ("call_b", "fco_b")]),
]


def sent_ids(items: list[dict[str, Any]]) -> list[tuple[str, str | None]]:
    return [(i["call_id"], i.get("id")) for i in items if i.get("type") in ("function_call", "function_call_output")]


def memory(path: Path, embedder: Embedder, fmt: str) -> Memory:
    return Memory(Config(data_dir=path, context_format=fmt), embedder=embedder,  # type: ignore[arg-type]
                  hot=False, background_indexing=False)


@pytest.mark.parametrize(("rows", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_call_item_id_is_sent_once(tmp_path: Path, embedder: Embedder, rows: list[dict[str, Any]],
                                        expected: list[tuple[str, str | None]]) -> None:
    with memory(tmp_path / "responses", embedder, "responses") as mem:
        mem.append_many("c", rows)
        items = mem.context("c", "thanks", BUDGET).messages
    assert sent_ids(items) == expected
    assert responses_problems(items) == []  # no item id and no call_id twice, each output after its call
    valid_responses(items)  # each item the openai SDK's ResponseInputItemParam, no key it lacks
    with memory(tmp_path / "as_stored", embedder, "as_stored") as mem:
        mem.append_many("c", rows)
        # an as_stored context sends the rows as appended, the repeats repeated
        assert mem.context("c", "thanks", BUDGET).messages == rows
        assert to_responses(mem.context("c", "thanks", BUDGET).messages) == items
        # the Agents SDK session's items, which its runner sends as model input
        session_items = asyncio.run(TiermemSession(mem, "c").get_items())
    assert sent_ids(session_items) == expected
    assert responses_problems(session_items) == []
    assert history_unchanged(rows, tmp_path / "as_stored", embedder)


def history_unchanged(rows: list[dict[str, Any]], path: Path, embedder: Embedder) -> bool:
    """The rows are stored as appended, ids and all (only what is sent leaves an id out)."""
    with memory(path, embedder, "as_stored") as mem:
        return [m.body for m in mem.history("c")] == rows
