"""`TiermemSession` over a `tiermem.client.Client` of a shared `tiermem serve` (real HTTP
to the real app on a real SQLite file; the real `openai-agents` with its ScriptedModel):
the same agent run gives the same items, the same model inputs under the filter, the
same pops and clears as over the server's Memory; a scoped token confines the session
to its namespace; an `AsyncClient`, whose methods are coroutines, is refused when the
session is made.

Fails on the code before: a session over an AsyncClient was made and broke at its first
call (a coroutine unpacked as a page of history), and a session took anything at all."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytest.importorskip("agents")
from agents import Agent, RunConfig, Runner, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from client_helpers import NS_VIA_CLIENT, NS_VIA_MEMORY, both, served
from service_helpers import TOKEN_ACME, TOKEN_ALICE, TOKEN_GLOBEX

from tiermem import Memory
from tiermem.adapters._common import MemoryLike
from tiermem.adapters.openai_agents import TiermemSession
from tiermem.client import AsyncClient, Client
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.errors import ConversationNotFound, ValidationError
from tiermem.tiers.formats import CLEAR_TYPE, RETRACT_TYPE

TURNS = ["What's the weather in Tokyo?", "Book the window seat, please.", "What city did I ask about?"]
PAST_TURNS = 30  # a past over the budget, so that the filter sends a planned slice
BUDGET_TOKENS = 600


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny and 21C in {city}"


@pytest.fixture(scope="module")
def url_mem(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[tuple[str, Memory]]:
    with served(tmp_path_factory.mktemp("client-agents") / "data", embedder) as got:
        yield got


def _model() -> ScriptedModel:
    return ScriptedModel([[function_call("weather", {"city": "Tokyo"}, call_id="call_w1")],
                          [assistant_message("Sunny and 21C in Tokyo.", item_id="msg_1")],
                          [assistant_message("Window seat booked.", item_id="msg_2")],
                          [assistant_message("You asked about Tokyo.", item_id="msg_3")]])


def _scenario(memory: MemoryLike, conv: str) -> dict[str, Any]:
    """A filtered run over a long past, then a pop, a clear and a fresh item; what each gave."""
    memory.append_many(conv, [{"role": r, "content": f"Note {i}: row {i} is fine, I like green tea."}
                              for i in range(PAST_TURNS) for r in ("user", "assistant")])
    s = TiermemSession(memory, conv)
    model = _model()
    agent = Agent(name="travel", instructions="Be brief.", model=model, tools=[weather])
    cfg = RunConfig(tracing_disabled=True, call_model_input_filter=s.model_input_filter(BUDGET_TOKENS))
    for turn in TURNS:
        asyncio.run(Runner.run(agent, turn, session=s, run_config=cfg))
    out: dict[str, Any] = {"inputs": [list(c.input) for c in model.calls], "items": asyncio.run(s.get_items())}
    out["popped"] = asyncio.run(s.pop_item())
    out["after_pop"] = asyncio.run(s.get_items(limit=3))
    asyncio.run(s.clear_session())
    out["after_clear"] = asyncio.run(s.get_items())
    asyncio.run(s.add_items([{"role": "user", "content": "Fresh start: Paris in May."}]))
    out["fresh"] = asyncio.run(s.get_items())
    out["context"] = s.context_items("Where to?", BUDGET_TOKENS)
    out["log"] = [m.body for m in memory.history(conv)]
    return out


def test_a_session_over_a_client_does_what_it_does_over_the_memory(url_mem: tuple[str, Memory]) -> None:
    url, mem = url_mem
    with both(url, mem) as (local, remote):
        want, got = _scenario(local, "agents"), _scenario(remote, "agents")
    assert got == want
    assert len(want["inputs"]) == 4 and len(want["items"]) == 2 * PAST_TURNS + 8
    assert want["popped"]["id"] == "msg_3"  # the last reply
    assert want["after_clear"] == [] and want["fresh"] == [{"role": "user", "content": "Fresh start: Paris in May."}]
    # the pop and the clear are rows in the log, written through the service
    assert got["log"][-3]["type"] == RETRACT_TYPE and got["log"][-2] == {"type": CLEAR_TYPE}
    assert [m.body for m in mem.history("agents", namespace=NS_VIA_CLIENT)] == got["log"]
    assert [m.body for m in mem.history("agents", namespace=NS_VIA_MEMORY)] == want["log"]


def test_a_scoped_token_confines_the_session_to_its_namespace(url_mem: tuple[str, Memory]) -> None:
    url, mem = url_mem
    item = {"role": "user", "content": "Alice's seat is 12A."}
    with Client(url, token=TOKEN_ALICE) as alice:  # no namespace: the token's own, acme/alice
        s = TiermemSession(alice, "seat")
        asyncio.run(s.add_items([item]))
        assert asyncio.run(s.get_items()) == [item]
    assert [m.body for m in mem.history("seat", namespace="acme/alice")] == [item]
    # another tenant's token: the conversation does not exist for it, pops and clears find nothing
    with Client(url, token=TOKEN_GLOBEX) as globex:
        other = TiermemSession(globex, "seat")
        assert asyncio.run(other.get_items()) == []
        assert asyncio.run(other.pop_item()) is None
        asyncio.run(other.clear_session())
    # a namespace above the token's prefix: no conversation of it exists for the token, nothing written
    with Client(url, token=TOKEN_ALICE, namespace="acme") as wider, pytest.raises(ConversationNotFound):
        asyncio.run(TiermemSession(wider, "seat").add_items([item]))
    assert [m.body for m in mem.history("seat", namespace="acme/alice")] == [item]
    assert "seat" not in mem.conversations("acme") and "seat" not in mem.conversations("globex")


@pytest.mark.parametrize("make", [
    lambda: AsyncClient("http://127.0.0.1:9", token=TOKEN_ACME),  # coroutines: would break at the first call
    lambda: "http://127.0.0.1:9",  # a URL, not a client
    lambda: None,  # nothing
])
def test_what_is_no_blocking_memory_is_refused_when_the_session_is_made(make: Callable[[], Any]) -> None:
    memory = make()
    with pytest.raises(ValidationError) as exc:
        TiermemSession(memory, "c")
    assert exc.value.field == "memory" and "tiermem.client.Client" in exc.value.problem
    if isinstance(memory, AsyncClient):
        asyncio.run(memory.aclose())
