"""A pop that splits an Anthropic row keeps each item's own block extras.

`TiermemSession.pop_item` on an assistant turn with text and tool calls hides the row
and appends the items before the popped one again. Their metadata left the row's
`anthropic_extra` out (its indexes count the whole message's blocks), so the items put
back lost a `tool_use`'s `caller` / `toolset_name` and a text block's citations:
`to_anthropic` sent the kept turn without them. Now each item carries its own blocks'
extras, indexed among the blocks it converts to (`tiermem.adapters.anthropic.
item_extras`); what `get_items` returns and what `pop_item` returns are unchanged. The
real Agents SDK session and the real `anthropic` SDK's reply type; real SQLite.
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

THINKING = {"type": "thinking", "thinking": "Two lookups.", "signature": "EqQB"}
CITE = {"type": "char_location", "cited_text": "Tokyo is sunny", "document_index": 0,
        "document_title": "forecast", "start_char_index": 0, "end_char_index": 14}
CITE_2 = {**CITE, "cited_text": "Paris is grey", "start_char_index": 15, "end_char_index": 28}
TEXT = {"type": "text", "text": "Checking both.", "citations": [CITE]}
TEXT_2 = {"type": "text", "text": "Then Paris.", "citations": [CITE_2]}
TOKYO = {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Tokyo"},
         "caller": {"type": "direct"}, "toolset_name": "forecasts"}
PARIS = {"type": "tool_use", "id": "toolu_2", "name": "weather", "input": {"city": "Paris"},
         "caller": {"type": "direct"}}
OSLO = {"type": "tool_use", "id": "toolu_3", "name": "weather", "input": {"city": "Oslo"}}

# (the reply's blocks, the anthropic_extra of each item put back, the kept turn's blocks
# as to_anthropic sends them once the kept call is answered)
CASES: list[tuple[list[dict[str, Any]], list[list[Any] | None], list[dict[str, Any]]]] = [
    # text then calls: the text's citations at 0, the kept call's caller and toolset
    ([TEXT, TOKYO, PARIS],
     [[[0, {"citations": [CITE]}]], [[0, {"caller": {"type": "direct"}, "toolset_name": "forecasts"}]]],
     [TEXT, TOKYO]),
    # thinking first: the text item carries it, so its text is block 1 there
    ([THINKING, TEXT, TOKYO, PARIS],
     [[[1, {"citations": [CITE]}]], [[0, {"caller": {"type": "direct"}, "toolset_name": "forecasts"}]]],
     [THINKING, TEXT, TOKYO]),
    # a text after a call (anthropic_order): still the text item's block 0
    ([TOKYO, TEXT, PARIS],
     [[[0, {"citations": [CITE]}]], [[0, {"caller": {"type": "direct"}, "toolset_name": "forecasts"}]]],
     [{"type": "text", "text": "Checking both.", "citations": [CITE]}, TOKYO]),
    # two text blocks are one text on the item (as get_items gives it): both citations
    ([TEXT, TEXT_2, TOKYO, PARIS],
     [[[0, {"citations": [CITE, CITE_2]}]], [[0, {"caller": {"type": "direct"}, "toolset_name": "forecasts"}]]],
     [{"type": "text", "text": "Checking both.\nThen Paris.", "citations": [CITE, CITE_2]}, TOKYO]),
    # no text, thinking first: the first call item carries it, its call is block 1
    ([THINKING, TOKYO, PARIS, OSLO],
     [[[1, {"caller": {"type": "direct"}, "toolset_name": "forecasts"}]], [[0, {"caller": {"type": "direct"}}]]],
     None),
    # a call without extras gets none; the popped call's go with it
    ([TEXT, OSLO, PARIS], [[[0, {"citations": [CITE]}]], None], [TEXT, OSLO]),
]


def _reply(blocks: list[dict[str, Any]]) -> Any:
    return anthropic.types.Message.model_validate({
        "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "stop_reason": "tool_use", "stop_sequence": None, "usage": {"input_tokens": 4, "output_tokens": 2},
        "content": blocks})


@pytest.mark.parametrize(("blocks", "extras", "sent"), CASES,
                         ids=["text then calls", "thinking first", "text after a call", "two texts",
                              "no text", "call without extras"])
def test_the_items_put_back_keep_their_blocks_extras(cold_memory: Memory, blocks: list[dict[str, Any]],
                                                     extras: list[list[Any] | None],
                                                     sent: list[dict[str, Any]] | None) -> None:
    cold_memory.append_many("a", from_anthropic({"role": "user", "content": "Weather?"}))
    cold_memory.append_many("a", from_anthropic(_reply(blocks)))
    session = TiermemSession(cold_memory, "a")
    before = asyncio.run(session.get_items())
    assert asyncio.run(session.pop_item()) == before[-1]
    assert asyncio.run(session.get_items()) == before[:-1]
    rows = cold_memory.history("a")
    retraction = next(m.position for m in rows if m.body.get("type") == RETRACT_TYPE)
    put_back = [(m.metadata or {}).get("anthropic_extra") for m in rows if m.position > retraction]
    assert put_back == extras
    if sent is None:
        return
    cold_memory.append_many("a", from_anthropic({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": sent[-1]["id"], "content": "sunny"}]}))
    req = to_anthropic(cold_memory.context("a", "Weather?", 2000), cold_memory)
    assert req.messages[1] == {"role": "assistant", "content": sent}
