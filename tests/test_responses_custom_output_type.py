"""A chat tool result converted to Responses (`to_responses_rows`, `to_responses`,
`context_format="responses"`) is typed by the call it answers in its own round: a
`custom_tool_call_output` for a custom tool's call, a `function_call_output` for a
function's (tiers.formats, "One unit": the n-th result of an id in a round answers the
n-th call of that id, as `tool_units` and `SentCallIds` pair them).

Fails on the code before: the type was picked by the id across the whole conversation,
so a server that numbers calls per reply (`call_0` every round), a custom tool's call in
one round and a function's in a later one, sent the later function's result as a
`custom_tool_call_output`, an output whose type is not its call's, which the Responses
API refuses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from provider_rules import responses_problems
from sdk_corpus import valid_responses

from tiermem import Config, Memory
from tiermem.tiers.embed import Embedder
from tiermem.tiers.formats import to_responses, to_responses_rows

BUDGET = 4000


def ask(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def custom(cid: str) -> dict[str, Any]:
    """A chat assistant message calling the custom tool `patch` under `cid`."""
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": cid, "type": "custom", "custom": {"name": "patch", "input": "diff"}}]}


def function(cid: str) -> dict[str, Any]:
    """A chat assistant message calling the function `lookup` under `cid`."""
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": cid, "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]}


def result(cid: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "content": text}


def custom_item(cid: str) -> dict[str, Any]:
    """A Responses custom tool call item (the Agents SDK's) under `cid`."""
    return {"type": "custom_tool_call", "id": "ctc_1", "call_id": cid, "name": "patch", "input": "diff"}


def function_item(cid: str) -> dict[str, Any]:
    """A Responses function call item under `cid`."""
    return {"type": "function_call", "id": "fc_1", "call_id": cid, "name": "lookup", "arguments": "{}"}


# each case: a log, and the (call type, output type, output text) of every pair in
# request order, in the Responses form
CASES: list[tuple[str, list[dict[str, Any]], list[tuple[str, str, str]]]] = [
    # a server that numbers calls per reply: a custom tool's call_0, then a function's
    ("custom then function across rounds",
     [ask("a"), custom("call_0"), result("call_0", "patched"), ask("b"), function("call_0"),
      result("call_0", "found"), ask("thanks")],
     [("custom_tool_call", "custom_tool_call_output", "patched"),
      ("function_call", "function_call_output", "found")]),
    # the other way round (passes before: the id was not a custom tool's yet in round one)
    ("function then custom across rounds",
     [ask("a"), function("call_0"), result("call_0", "found"), ask("b"), custom("call_0"),
      result("call_0", "patched"), ask("thanks")],
     [("function_call", "function_call_output", "found"),
      ("custom_tool_call", "custom_tool_call_output", "patched")]),
    # custom, function, custom: each round's result follows its own call
    ("custom, function, custom across rounds",
     [ask("a"), custom("call_0"), result("call_0", "p1"), ask("b"), function("call_0"), result("call_0", "f"),
      ask("c"), custom("call_0"), result("call_0", "p2"), ask("thanks")],
     [("custom_tool_call", "custom_tool_call_output", "p1"), ("function_call", "function_call_output", "f"),
      ("custom_tool_call", "custom_tool_call_output", "p2")]),
    # one round (Responses call items, answered by chat tool messages), a custom tool and
    # a function sharing call_0: the first result answers the custom call, the second the function
    ("custom and function sharing an id in one round",
     [ask("a"), custom_item("call_0"), function_item("call_0"), result("call_0", "patched"),
      result("call_0", "found"), ask("thanks")],
     [("custom_tool_call", "custom_tool_call_output", "patched"),
      ("function_call", "function_call_output", "found")]),
    # the same round the other way round: a function's call_0 first, then a custom tool's
    ("function and custom sharing an id in one round",
     [ask("a"), function_item("call_0"), custom_item("call_0"), result("call_0", "found"),
      result("call_0", "patched"), ask("thanks")],
     [("function_call", "function_call_output", "found"),
      ("custom_tool_call", "custom_tool_call_output", "patched")]),
    # ids of their own (passes before and after)
    ("fresh ids",
     [ask("a"), custom("call_a"), result("call_a", "patched"), ask("b"), function("call_b"),
      result("call_b", "found"), ask("thanks")],
     [("custom_tool_call", "custom_tool_call_output", "patched"),
      ("function_call", "function_call_output", "found")]),
]


def pairs(items: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """(call type, output type, output text) of each call, its output found by call_id
    (each sent once in the Responses form)."""
    out = []
    for item in items:
        if item.get("type") in ("function_call", "custom_tool_call"):
            answers = [o for o in items if o.get("type") in ("function_call_output", "custom_tool_call_output")
                       and o["call_id"] == item["call_id"]]
            out.append((item["type"], answers[0]["type"] if len(answers) == 1 else f"{len(answers)} outputs",
                        answers[0]["output"] if len(answers) == 1 else ""))
    return out


@pytest.mark.parametrize(("rows", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_converted_output_type_is_its_calls(rows: list[dict[str, Any]], expected: list[tuple[str, str, str]]) -> None:
    items = to_responses(rows)
    assert pairs(items) == expected
    assert responses_problems(items) == []
    valid_responses(items)
    # to_responses_rows (the Agents session's items) types each output as to_responses does
    converted = [item for row in to_responses_rows(rows) for item in row]
    assert [i.get("type") for i in converted] == [i.get("type") for i in items]


@pytest.mark.parametrize(("rows", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_responses_context_output_type_is_its_calls(tmp_path: Path, embedder: Embedder, rows: list[dict[str, Any]],
                                                    expected: list[tuple[str, str, str]]) -> None:
    with Memory(Config(data_dir=tmp_path, context_format="responses"), embedder=embedder,  # type: ignore[arg-type]
                hot=False, background_indexing=False) as mem:
        mem.append_many("c", rows)
        items = mem.context("c", "thanks", BUDGET).messages
    assert pairs(items) == expected
    assert responses_problems(items) == []
    valid_responses(items)
