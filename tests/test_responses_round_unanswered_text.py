"""A Responses reply's items that joined its calls' round (`tiers.formats.joins_round`:
the reply's text, a hosted tool's call) stay in the context when the round is left out
for a call no result answers (`planner.candidates.tool_units`): each is a unit of its
own, with the reasoning right before it; only the calls, their results and the
reasoning leading them go ("a tool call no result answers").

Fails on the code before (8509207): the whole round went, so the assistant's reply text
to the user (`[user, function_call, message, user]`, an agent stopped before running
the tool) was never shown again; before 8509207 the text stayed and only the call went.

Real SQLite files, the real `openai` SDK's types (the context validated against
`ResponseInputItemParam` / `ChatCompletionMessageParam`), the repo's provider rules
for the Anthropic form (`to_anthropic`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hash_embedder import HashEmbedder
from provider_rules import anthropic_problems, chat_problems, responses_problems
from sdk_corpus import valid_chat, valid_responses

from tiermem import Config, Memory
from tiermem.adapters.anthropic import to_anthropic
from tiermem.planner.candidates import UNANSWERED_CALL, tool_units
from tiermem.tiers.models import StoredMessage

BUDGET = 4000  # tokens: room for every case's whole log, so nothing is cut for the budget
ASK = {"role": "user", "content": "Where does order A1 ship from?"}
NEXT = {"role": "user", "content": "Thanks. Also, can you recommend a good book?"}
RS = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "look it up"}]}
RS2 = {"type": "reasoning", "id": "rs_2", "summary": [{"type": "summary_text", "text": "say so"}]}
FC = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "lookup", "arguments": '{"order":"A1"}',
      "status": "completed"}
FC2 = {"type": "function_call", "id": "fc_2", "call_id": "call_2", "name": "lookup", "arguments": '{"order":"B2"}',
       "status": "completed"}
MSG = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
       "content": [{"type": "output_text", "text": "Your parcel ships from the Rotterdam depot.", "annotations": []}]}
WS = {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "depot"}}
OUT = {"type": "function_call_output", "call_id": "call_1", "output": "order A1: packed"}

# each case: the reply's items (between ASK and NEXT; no output answers call_2, nor
# call_1 where OUT is not among them), the positions (ASK is 0) of the units kept, oldest
# first, and of the round left out
CASES = [
    # the reported rows: the call goes, the text stays
    pytest.param([FC, MSG], [[2]], [1], id="call-message"),
    # the reasoning leading the call goes with it, the one before the text stays with it
    pytest.param([RS, FC, RS2, MSG], [[3, 4]], [1, 2], id="reasoning-call-reasoning-message"),
    # a hosted tool's call that joined the round stays (it needs no output)
    pytest.param([FC, WS], [[2]], [1], id="call-web-search"),
    # text between two parallel calls: both calls go
    pytest.param([FC, MSG, FC2], [[2]], [1, 3], id="call-message-call"),
    # one of two calls answered: the calls and that result go, the text stays
    pytest.param([FC, FC2, MSG, OUT], [[3]], [1, 2, 4], id="one-of-two-answered"),
    # a reasoning item with nothing after it goes with the round (the API refuses it last)
    pytest.param([FC, MSG, RS2], [[2]], [1, 3], id="trailing-reasoning"),
]
FORMATS = ["as_stored", "responses", "chat"]


def _stored(bodies: list[dict[str, Any]]) -> list[StoredMessage | None]:
    return [StoredMessage("t", i, b.get("role", "assistant"), b, None, None, 0.0, tokens=1)
            for i, b in enumerate(bodies)]


@pytest.mark.parametrize(("reply", "kept", "gone"), CASES)
def test_the_joined_items_stay_when_the_round_goes(reply: list[dict[str, Any]], kept: list[list[int]],
                                                   gone: list[int]) -> None:
    msgs = _stored([ASK, *reply, NEXT])
    units = tool_units(msgs, [False] * len(msgs))
    groups = [[m.position for m in g] for g in reversed(units.groups)]  # oldest first
    assert groups == [[0], *kept, [len(msgs) - 1]]
    assert [([m.position for m in d], why) for d, why in units.dropped] == [(gone, UNANSWERED_CALL)]


@pytest.fixture
def make_memory(tmp_path: Path) -> Iterator[Any]:
    opened: list[Memory] = []

    def make(fmt: str) -> Memory:
        m = Memory(Config(data_dir=tmp_path / f"m{len(opened)}", context_format=fmt), embedder=HashEmbedder(),
                   hot=False, background_indexing=False)
        opened.append(m)
        return m

    yield make
    for m in opened:
        m.close()


def _problems(fmt: str, sent: list[dict[str, Any]]) -> list[str]:
    if fmt == "chat":
        valid_chat(sent)
        return chat_problems(sent)
    valid_responses(sent)
    return responses_problems(sent)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("late_output", [False, True], ids=["never-answered", "answered-after-the-user"])
def test_the_reply_text_is_sent_without_its_call(make_memory: Any, fmt: str, late_output: bool) -> None:
    m = make_memory(fmt)
    m.append_many("t", [ASK, FC, MSG, NEXT, *([OUT] if late_output else [])])
    ctx = m.context("t", NEXT["content"], budget=BUDGET)
    # the text, as an assistant message of the tail, between the two user messages
    said = [json.dumps(x) for x in ctx.messages if x.get("role") in ("user", "assistant")]
    assert [("Rotterdam" in s, "A1 ship" in s, "good book" in s) for s in said][-3:] == [
        (False, True, False), (True, False, False), (False, False, True)]
    assert "call_1" not in json.dumps(ctx.messages)  # the call (and a late output) left out
    assert [li.positions for li in ctx.plan.left_out if li.reason == UNANSWERED_CALL] == [[1]]
    assert _problems(fmt, ctx.messages) == []
    out = to_anthropic(ctx, m)
    assert anthropic_problems(out.system or [], out.messages) == []
