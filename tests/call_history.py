"""Builders of a tool-calling log in the chat and Responses shapes, shared by the tests of
the ids each form sends (test_anthropic_unique_tool_ids, test_responses_unique_call_ids).

Every call is to one tool, `lookup`, its arguments `{"n": <place>}` naming the call's place,
so a test can tell which call a sent id and result went with. `per_reply_rounds` is the log
of a server that numbers its calls per reply (`call_0` every round), the case both forms
must rename.

Imported explicitly by the test modules (the lead owns conftest.py)."""

from __future__ import annotations

from typing import Any

from tiermem.tiers.formats import CALL_ID_MAX_CHARS

BUDGET = 4000  # tokens of context: room for every case's whole log, so nothing is cut
LONG_ID = "c" * CALL_ID_MAX_CHARS  # the longest id append takes: a suffix must not pass it


def ask(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def calls(*ids: str) -> dict[str, Any]:
    """An assistant message calling `lookup` once per id, its arguments naming the id's place."""
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": i, "type": "function", "function": {"name": "lookup", "arguments": f'{{"n": {n}}}'}}
        for n, i in enumerate(ids)]}


def result(cid: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "content": text}


def item_call(cid: str, n: int) -> dict[str, Any]:
    return {"type": "function_call", "id": f"fc_{n}", "call_id": cid, "name": "lookup", "arguments": f'{{"n": {n}}}'}


def item_output(cid: str, text: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": cid, "output": text}


def per_reply_rounds(count: int) -> list[dict[str, Any]]:
    """`count` rounds of one call each, every one numbered `call_0` by the server."""
    return [row for r in range(count)
            for row in (ask(f"weather {r}?"), calls("call_0"), result("call_0", f"sunny {r}"),
                        {"role": "assistant", "content": f"Sunny {r}."})]
