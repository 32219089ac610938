"""`TiermemChatMessageHistory.add_messages` (and every path through `to_openai`) names
what it refuses: an item that is no LangChain message (`messages[i]`, before: a bare
`AttributeError` from deep inside), and a tool call whose args hold NaN or Infinity
(`messages[i].tool_calls[j].args`, before: stored as `{"x": NaN}`, text no JSON reader
takes). Nothing of a refused batch is stored.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("langchain_core")
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from tiermem import Memory
from tiermem.adapters.langchain import TiermemChatMessageHistory
from tiermem.errors import ValidationError


def _call(args: dict[str, Any]) -> AIMessage:
    return AIMessage("", tool_calls=[{"id": "c", "name": "f", "args": args}])


@pytest.mark.parametrize(("messages", "field"), [
    (["hello"], "messages[0]"),  # a bare string
    ([HumanMessage("ok"), {"role": "user", "content": "x"}], "messages[1]"),  # a dict, second
    ([_call({"x": float("nan")}), ToolMessage("r", tool_call_id="c")], "messages[0].tool_calls[0].args"),  # NaN
    ([_call({"deep": [1, float("inf")]})], "messages[0].tool_calls[0].args"),  # Infinity, nested
])
def test_refused_naming_the_field(cold_memory: Memory, messages: list[Any], field: str) -> None:
    history = TiermemChatMessageHistory(cold_memory, "h")
    with pytest.raises(ValidationError) as err:
        history.add_messages(messages)
    assert err.value.field == field
    assert history.messages == []  # nothing of the batch stored


def test_finite_args_are_stored(cold_memory: Memory) -> None:
    history = TiermemChatMessageHistory(cold_memory, "h")
    history.add_messages([_call({"x": 1.5}), ToolMessage("r", tool_call_id="c")])
    assert history.messages[0].tool_calls[0]["args"] == {"x": 1.5}
