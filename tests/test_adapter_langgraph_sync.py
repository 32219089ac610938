"""Several `TiermemHooks` on one conversation (workers sharing a LangGraph checkpointer,
or processes) store each message once: "already stored" is read from the log on every
sync, not remembered per instance. Each instance read the stored ids once, so each
re-appended what the others stored, and the duplicates stayed in views and contexts."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("langgraph")
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from tiermem import Config, Memory
from tiermem.adapters.langchain import TiermemChatMessageHistory
from tiermem.adapters.langgraph import TiermemHooks
from tiermem.tiers.embed_onnx import FastEmbedder


class FakeToolModel(GenericFakeChatModel):
    def bind_tools(self, tools: Any, **kwargs: Any) -> FakeToolModel:
        return self


def test_two_workers_on_one_checkpointer_store_each_turn_once(cold_memory: Memory) -> None:
    from langgraph.prebuilt import create_react_agent

    saver = InMemorySaver()
    model = FakeToolModel(messages=iter([AIMessage(f"reply {i}") for i in range(8)]))
    workers = [create_react_agent(model, [], pre_model_hook=h.pre_model_hook, post_model_hook=h.post_model_hook,
                                  checkpointer=saver)
               for h in (TiermemHooks(cold_memory, "thread", budget=2000) for _ in range(2))]
    cfg = {"configurable": {"thread_id": "thread"}}
    for turn in range(4):
        workers[turn % 2].invoke({"messages": [HumanMessage(f"question {turn}")]}, cfg)
    want = [x for t in range(4) for x in (f"question {t}", f"reply {t}")]
    assert [m.body.get("content") for m in cold_memory.history("thread")] == want
    assert [m.get("content") for m in cold_memory.context("thread", "question 3", 2000).messages] == want


def test_hooks_through_two_memories_on_one_directory_leave_each_message_visible_once(
        tmp_path: Path, embedder: FastEmbedder) -> None:
    cfg = Config(data_dir=tmp_path / "d")
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as a, \
            Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as b:
        state: list[BaseMessage] = []
        for turn in range(5):
            state += [HumanMessage(f"question {turn}", id=f"h{turn}"), AIMessage(f"reply {turn}", id=f"a{turn}")]
            hooks = [TiermemHooks(m, "t") for m in (a, b) for _ in range(2)]  # as four processes' hooks
            start = threading.Barrier(len(hooks))
            threads = [threading.Thread(target=_sync, args=(h, list(state), start)) for h in hooks]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        got = TiermemChatMessageHistory(b, "t").messages
        assert [m.id for m in got] == [m.id for m in state]
        ctx = a.context("t", "question 4", 4000)
        assert [m.get("content") for m in ctx.messages] == [m.content for m in state]
        # the log keeps whatever a race wrote twice, each later copy hidden by a retraction
        hist = a.history("t")
        copies = [m for m in hist if m.body.get("type") != "tiermem.retract"]
        assert len(hist) - len(copies) == len(copies) - len(state)


def _sync(hooks: TiermemHooks, messages: list[BaseMessage], start: threading.Barrier) -> None:
    start.wait()  # all read the log at about the same time
    hooks.sync(messages)
