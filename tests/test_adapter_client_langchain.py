"""The LangChain adapters over a `tiermem.client.Client` of a shared `tiermem serve` (real
HTTP to the real app on a real SQLite file; the real langchain and langgraph packages
with langchain-core's fake chat model): the chat history, the `create_agent`
middleware and the LangGraph hooks store the same rows, give back the same messages and
send the model the same contexts as over the server's Memory, and an artifact over the
server's metadata limit is left out the same way, the server refusing it for the client.

Fails on the code before: every one of them read `memory.config.max_metadata_bytes`,
which a Client has not (AttributeError at the first message stored)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("langchain.agents")
pytest.importorskip("langgraph")
from client_helpers import NS_VIA_CLIENT, both, served
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_helpers import RecordingFakeModel, weather
from service_helpers import TOKEN_ALICE

from tiermem import Memory
from tiermem.adapters._common import MemoryLike
from tiermem.adapters.langchain import METADATA_ARTIFACT_KEY, TiermemChatMessageHistory
from tiermem.adapters.langchain_agent import TiermemMiddleware
from tiermem.adapters.langgraph import TiermemHooks
from tiermem.client import Client
from tiermem.tiers.embed_onnx import FastEmbedder

MAX_METADATA_BYTES = 512  # the server's: an artifact of ARTIFACT_BYTES is over it
ARTIFACT_BYTES = 2000
PAST_TURNS = 30  # a past over the budget, so that the model gets a planned slice
BUDGET_TOKENS = 500


@pytest.fixture(scope="module")
def url_mem(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[tuple[str, Memory]]:
    with served(tmp_path_factory.mktemp("client-langchain") / "data", embedder,
                max_metadata_bytes=MAX_METADATA_BYTES) as got:
        yield got


def _seed(memory: MemoryLike, conv: str) -> None:
    memory.append_many(conv, [{"role": r, "content": f"Note {i}: row {i} is fine, I like green tea."}
                              for i in range(PAST_TURNS) for r in ("user", "assistant")])


def _replies() -> Iterator[AIMessage]:
    yield AIMessage("", tool_calls=[{"id": "call_w", "name": "weather", "args": {"city": "Tokyo"}}], id="r0")
    yield AIMessage("Sunny and 21C in Tokyo.", id="r1")
    yield AIMessage("You asked about Tokyo.", id="r2")


def _as_dicts(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    """What a message is, less the ids LangChain makes up per run (a tool message's)."""
    return [{**m.model_dump(), "id": m.id if not isinstance(m, ToolMessage) else None} for m in messages]


def _history(memory: MemoryLike, conv: str) -> dict[str, Any]:
    h = TiermemChatMessageHistory(memory, conv)
    h.add_messages([HumanMessage("Weather in Tokyo?", id="m1"),
                    AIMessage("", tool_calls=[{"id": "c1", "name": "weather", "args": {"city": "Tokyo"}}], id="m2"),
                    ToolMessage("sunny", tool_call_id="c1", id="m3", artifact={"raw": "x" * ARTIFACT_BYTES},
                                status="error"),
                    ToolMessage("cloudy", tool_call_id="c1", id="m4", artifact={"raw": "small"})])
    out: dict[str, Any] = {"messages": _as_dicts(h.messages), "log": [m.metadata for m in memory.history(conv)]}
    h.clear()
    out["cleared"] = h.messages
    h.add_messages([HumanMessage("Paris in May.", id="m5")])
    out["fresh"] = _as_dicts(h.messages)
    return out


def _middleware(memory: MemoryLike, conv: str) -> dict[str, Any]:
    _seed(memory, conv)
    model = RecordingFakeModel(messages=_replies())
    model.received = []
    agent = create_agent(model, [weather], middleware=[TiermemMiddleware(memory, conv, budget=BUDGET_TOKENS)])
    for turn in ["Weather in Tokyo?", "Which city did I ask about?"]:
        agent.invoke({"messages": [HumanMessage(turn, id=f"h-{turn}")]})
    return {"received": [_as_dicts(r) for r in model.received], "log": [m.body for m in memory.history(conv)]}


def _hooks(memory: MemoryLike, conv: str) -> dict[str, Any]:
    from langgraph.prebuilt import create_react_agent

    _seed(memory, conv)
    model = RecordingFakeModel(messages=_replies())
    model.received = []
    hooks = TiermemHooks(memory, conv, budget=BUDGET_TOKENS)
    agent = create_react_agent(model, [weather], pre_model_hook=hooks.pre_model_hook,
                               post_model_hook=hooks.post_model_hook)
    for turn in ["Weather in Tokyo?", "Which city did I ask about?"]:
        agent.invoke({"messages": [HumanMessage(turn, id=f"h-{turn}")]})
    return {"received": [_as_dicts(r) for r in model.received], "log": [m.body for m in memory.history(conv)]}


@pytest.mark.parametrize("scenario", [
    _history,  # add_messages, messages, clear; an artifact over the server's limit
    _middleware,  # create_agent with a tool, the second turn recalling the first
    _hooks,  # create_react_agent's pre/post model hooks
])
def test_an_adapter_over_a_client_does_what_it_does_over_the_memory(url_mem: tuple[str, Memory],
                                                                     scenario: Any) -> None:
    url, mem = url_mem
    conv = scenario.__name__.strip("_")
    with both(url, mem) as (local, remote):
        want, got = scenario(local, conv), scenario(remote, conv)
    assert got == want
    assert len(want.get("received", [])) in (0, 3)  # the tool call, its result's reply, the second turn
    assert [m.body for m in mem.history(conv, namespace=NS_VIA_CLIENT)][-1] == \
        [m.body for m in local.history(conv)][-1]


def test_an_artifact_over_the_servers_limit_is_left_out_and_the_rest_kept(url_mem: tuple[str, Memory]) -> None:
    url, mem = url_mem
    with both(url, mem) as (_local, remote):
        got = _history(remote, "artifacts")
    big, small = got["log"][2], got["log"][3]
    assert big == {"langchain_id": "m3", "langchain_status": "error"}  # the artifact alone left out
    assert small[METADATA_ARTIFACT_KEY] == {"raw": "small"}
    assert got["cleared"] == [] and [m["content"] for m in got["fresh"]] == ["Paris in May."]


def test_a_scoped_token_confines_the_history_to_its_namespace(url_mem: tuple[str, Memory]) -> None:
    url, mem = url_mem
    with Client(url, token=TOKEN_ALICE) as alice:  # no namespace: the token's own, acme/alice
        TiermemChatMessageHistory(alice, "notes").add_messages([HumanMessage("Aisle, not window.", id="n1")])
        assert [m.id for m in TiermemChatMessageHistory(alice, "notes").messages] == ["n1"]
    assert [m.metadata for m in mem.history("notes", namespace="acme/alice")] == [{"langchain_id": "n1"}]
    assert "notes" not in mem.conversations("acme")
