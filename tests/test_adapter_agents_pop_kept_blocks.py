"""A pop that splits an Anthropic row keeps the row's kept blocks whole.

`TiermemSession.pop_item` on an assistant turn with a server tool's call and result
(`anthropic_blocks`), text and tool calls hides the row and appends the items before the
popped one again. Their metadata carried the row's `anthropic_blocks` as they were, indexed
among the whole message's blocks, on every item; the text item, one text (the message's
text parts joined, the kept blocks' words first), got the server call in place of all
its text and the result nowhere, and the call without its result was left out: the kept
turn went to Claude as its tool call alone, its search and its answer text gone. Now the
text item carries the kept blocks, indexed among the blocks its text is cut into at their
words (`tiermem.adapters.anthropic.item_blocks`), and a call item none; what `get_items`
and `pop_item` return is unchanged. The real Agents SDK session and the real `anthropic`
SDK's reply type; real SQLite.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("agents")
anthropic = pytest.importorskip("anthropic")

from tiermem import Memory  # noqa: E402
from tiermem.adapters.anthropic import from_anthropic, to_anthropic  # noqa: E402
from tiermem.adapters.openai_agents import TiermemSession  # noqa: E402
from tiermem.tiers.formats import RETRACT_TYPE  # noqa: E402

THINKING = {"type": "thinking", "thinking": "Search, then two lookups.", "signature": "EqQB"}
SEARCH = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "tokyo weather"}}
RESULT = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [
    {"type": "web_search_result", "url": "https://w.test/tokyo", "title": "Tokyo forecast",
     "encrypted_content": "QUJDREVG", "page_age": "May 1, 2025"}]}
CITE = {"type": "web_search_result_location", "url": "https://w.test/tokyo", "title": "Tokyo forecast",
        "encrypted_index": "RW5j", "cited_text": "Tokyo is sunny"}
BEFORE = {"type": "text", "text": "Let me search first."}
TEXT = {"type": "text", "text": "Checking both."}
CITED = {"type": "text", "text": "Tokyo is sunny, per the forecast.", "citations": [CITE]}
TOKYO = {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Tokyo"}}
PARIS = {"type": "tool_use", "id": "toolu_2", "name": "weather", "input": {"city": "Paris"}}
SEARCH_SENT = {"id": "srvtoolu_1", "input": {"query": "tokyo weather"}, "name": "web_search", "type": "server_tool_use"}
RESULT_SENT = {"content": [{"encrypted_content": "QUJDREVG", "page_age": "May 1, 2025", "title": "Tokyo forecast",
                            "type": "web_search_result", "url": "https://w.test/tokyo"}],
               "tool_use_id": "srvtoolu_1", "type": "web_search_tool_result"}

# (the reply's blocks, the kept turn's blocks as to_anthropic sends them once the kept call
# is answered: before, the server call, its result and the text were gone, the call alone)
CASES: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = [
    # the search, its answer, two calls: the popped call's row put back whole but for it
    ([SEARCH, RESULT, TEXT, TOKYO, PARIS], [SEARCH_SENT, RESULT_SENT, TEXT, TOKYO]),
    # thinking first: the text item carries it, its kept blocks after it
    ([THINKING, SEARCH, RESULT, TEXT, TOKYO, PARIS], [THINKING, SEARCH_SENT, RESULT_SENT, TEXT, TOKYO]),
    # text on both sides of the search: three texts cut apart again
    ([BEFORE, SEARCH, RESULT, TEXT, TOKYO, PARIS], [BEFORE, SEARCH_SENT, RESULT_SENT, TEXT, TOKYO]),
    # no text of its own: the text item is the kept blocks' words alone
    ([SEARCH, RESULT, TOKYO, PARIS], [SEARCH_SENT, RESULT_SENT, TOKYO]),
    # a cited text after the search: its citations on it, not on the server call
    ([SEARCH, RESULT, CITED, TOKYO, PARIS], [SEARCH_SENT, RESULT_SENT, CITED, TOKYO]),
]


def _reply(blocks: list[dict[str, Any]]) -> Any:
    return anthropic.types.Message.model_validate({
        "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "stop_reason": "tool_use", "stop_sequence": None, "usage": {"input_tokens": 4, "output_tokens": 2},
        "content": blocks})


@pytest.mark.parametrize(("blocks", "sent"), CASES,
                         ids=["search then calls", "thinking first", "text around", "no text", "cited text"])
def test_the_items_put_back_keep_the_rows_kept_blocks(cold_memory: Memory, blocks: list[dict[str, Any]],
                                                      sent: list[dict[str, Any]]) -> None:
    cold_memory.append_many("a", from_anthropic({"role": "user", "content": "Weather?"}))
    cold_memory.append_many("a", from_anthropic(_reply(blocks)))
    session = TiermemSession(cold_memory, "a")
    before = asyncio.run(session.get_items())
    assert asyncio.run(session.pop_item()) == before[-1]  # the popped call, as stored
    assert asyncio.run(session.get_items()) == before[:-1]
    rows = cold_memory.history("a")
    retraction = next(m.position for m in rows if m.body.get("type") == RETRACT_TYPE)
    put_back = [m for m in rows if m.position > retraction]
    # the kept blocks on the text item only, whole as stored
    assert [[b for _i, b in (m.metadata or {}).get("anthropic_blocks", [])] for m in put_back] == \
        [[SEARCH_SENT, RESULT_SENT], []]
    cold_memory.append_many("a", from_anthropic({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}]}))
    req = to_anthropic(cold_memory.context("a", "Weather?", 4000), cold_memory)
    assert req.messages[1] == {"role": "assistant", "content": sent}
