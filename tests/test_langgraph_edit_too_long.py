"""A LangGraph edit reaching back over more visible messages than one append holds.

An edit is one batch (a retraction and a copy of the edited row and of every row after
it; the state's new messages with it where one append takes them, else after it:
`_langchain_sync`), since only one transaction keeps it
all or nothing for readers; past `MAX_BATCH_MESSAGES` (a server's `max_batch_messages`)
it is refused before anything is written, as `EditTooLong` naming the limit, how far
the edit reaches and how far an edit may reach, not the bare batch refusal it was
("messages: 10003 messages exceed the batch limit of 10000", or over a `Client` "must
hold 1..10000 messages, got 10003": a batch the graph's caller never sent). Putting the
stored version back in the state ends the refusal, and an edit within reach is then
written. A real `create_react_agent` graph with the LangGraph hooks and a checkpointer,
real SQLite; a state of 5,000 messages (the limit is the library's constant, so the
state is that long: the refused batch costs about a second, the state's first sync
about 8 s and its first context 4 s: 12-20 s in all, 20 s on a loaded 2-core run). A `Client` is held
to its server's limit (read from a real server's /v1/limits).

Fails on the code before: the refusal was the batch's own ValidationError."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph")
from client_helpers import NS, served
from hash_embedder import HashEmbedder
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from service_helpers import TOKEN_ACME

from tiermem import Config, Memory
from tiermem.adapters._common import MemoryLike, batch_limit, visible
from tiermem.adapters.langgraph import TiermemHooks
from tiermem.client import Client
from tiermem.errors import EditTooLong
from tiermem.memory import MAX_BATCH_MESSAGES
from tiermem.tiers.embed_onnx import FastEmbedder

CONV = "long-thread"
THREAD = {"configurable": {"thread_id": CONV}}
# visible messages from the first one on once the graph has answered: the state and the
# reply; an edit of the first retracts and copies each: 2 * (STATE + 1) rows, two past
# the limit (the next question would go after them, in the same batch or the next)
STATE = MAX_BATCH_MESSAGES // 2
WANT_ROWS = 2 * (STATE + 1)
FARTHEST = MAX_BATCH_MESSAGES // 2  # the reach an edit may have: a retraction and a copy each


class FakeToolModel(GenericFakeChatModel):
    def bind_tools(self, tools: Any, **kwargs: Any) -> FakeToolModel:
        return self


def _state() -> list[BaseMessage]:
    return [HumanMessage(f"question {i}", id=f"h{i}") if i % 2 == 0 else AIMessage(f"answer {i}", id=f"a{i}")
            for i in range(STATE)]


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[MemoryLike]:
    # the hash embedder: what is measured is the batch, not the model
    with Memory(Config(data_dir=tmp_path / "data"), embedder=HashEmbedder(), hot=False,
                background_indexing=False) as mem:
        yield mem


def test_the_limit_is_the_stores(tmp_path: Path, embedder: FastEmbedder) -> None:
    """A local store's is the library's; a `Client`'s is its server's (read from its
    /v1/limits), never above the library's (the client refuses more before sending)."""
    with Memory(Config(data_dir=tmp_path / "local"), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        assert batch_limit(mem) == batch_limit(mem.namespaced(NS)) == MAX_BATCH_MESSAGES
    with served(tmp_path / "data", embedder) as (url, _), Client(url, token=TOKEN_ACME, namespace=NS) as client:
        limits = client.limits()
        assert limits is not None and batch_limit(client) == limits.max_batch_messages == MAX_BATCH_MESSAGES


def test_an_edit_past_the_batch_limit_is_refused_naming_it_and_writes_nothing(memory: MemoryLike) -> None:
    from langgraph.prebuilt import create_react_agent

    model = FakeToolModel(messages=iter([AIMessage("noted", id="r1"), AIMessage("edited reply", id="r2")]))
    hooks = TiermemHooks(memory, CONV, budget=500)
    agent = create_react_agent(model, [], pre_model_hook=hooks.pre_model_hook,
                               post_model_hook=hooks.post_model_hook, checkpointer=InMemorySaver())
    agent.invoke({"messages": _state()}, THREAD)
    rows = len(memory.history(CONV))
    assert len(visible(memory, CONV)) == STATE + 1

    agent.update_state(THREAD, {"messages": [HumanMessage("question 0, edited", id="h0")]})
    with pytest.raises(EditTooLong) as err:
        agent.invoke({"messages": [HumanMessage("next question", id="h-next")]}, THREAD)
    e = err.value
    assert (e.field, e.value, e.limit, e.reach, e.position) == ("messages", WANT_ROWS, MAX_BATCH_MESSAGES,
                                                                 STATE + 1, 0)
    assert str(e) == (
        f"messages: conversation {CONV!r}: the edit of the stored message at position 0 reaches back over "
        f"{STATE + 1} visible messages, and an edit is written as one batch (a retraction and a copy of each: "
        f"{WANT_ROWS} messages), over the store's max_batch_messages of "
        f"{MAX_BATCH_MESSAGES}; nothing was written. An edit may reach back over at most {FARTHEST} messages: put "
        "the stored version back in the state, or remove the message from it (RemoveMessage), and add the "
        "correction as a new message")
    assert len(memory.history(CONV)) == rows  # nothing written, the new question neither

    # the stored version back: the next call stores the question, and an edit within reach is written
    agent.update_state(THREAD, {"messages": [HumanMessage("question 0", id="h0"),
                                             AIMessage(f"answer {STATE - 1}, edited", id=f"a{STATE - 1}")]})
    agent.invoke({"messages": [HumanMessage("next question", id="h-next")]}, THREAD)
    shown = [m.body.get("content") for m in visible(memory, CONV)]
    assert shown[0] == "question 0" and shown[-4:] == [f"answer {STATE - 1}, edited", "noted", "next question",
                                                       "edited reply"]
    assert len(shown) == STATE + 3
