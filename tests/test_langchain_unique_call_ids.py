"""The LangChain adapters give a model each tool call id once, each tool message naming
its own call's (`tiermem.adapters.langchain.unique_call_ids`, the renaming of
`tiers.formats.SentCallIds`): the chat history's `messages` (what
`RunnableWithMessageHistory` sends) and the context the LangGraph hooks and the
`create_agent` middleware send (`ConversationSync.context_messages`), in every
`context_format`. The rows keep the ids appended. Real langchain-core messages, real
SQLite, LangChain's own conversion to the chat form checked by provider_rules.

Fails on the code before: a server that numbers its calls per reply (`call_0` every
round) left `call_0` in every round of both, which the integrations send as it is:
`ChatAnthropic` (langchain-anthropic 1.7.10's `_format_messages`) two `tool_use` blocks
`call_0` ("tool_use ids must be unique"), `ChatOpenAI`'s Responses input (langchain-openai
1.8.1's `_construct_responses_api_input`) the second round's call left out and two
`function_call_output`s of `call_0`, `convert_to_openai_messages` one `tool_call_id` twice
(a strict Chat Completions server: "Duplicate value for 'tool_call_id'")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_core")
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
    convert_to_openai_messages,
)
from provider_rules import chat_problems

from tiermem import Config, Memory
from tiermem.adapters.langchain import TiermemChatMessageHistory
from tiermem.adapters.langgraph import TiermemHooks
from tiermem.tiers.embed import Embedder

BUDGET = 4000  # tokens of the hooks' context: room for every case's whole log, so nothing is cut


def ask(text: str) -> HumanMessage:
    return HumanMessage(text)


def calls(*ids: str, text: str = "") -> AIMessage:
    """An AI message calling `lookup` once per id, its arguments naming the id's place."""
    return AIMessage(text, tool_calls=[{"id": i, "name": "lookup", "args": {"n": n}} for n, i in enumerate(ids)])


def result(cid: str, text: str) -> ToolMessage:
    return ToolMessage(text, tool_call_id=cid)


def per_reply_rounds(count: int) -> list[BaseMessage]:
    """`count` rounds of one call each, every one numbered `call_0` by the server."""
    return [m for r in range(count)
            for m in (ask(f"weather {r}?"), calls("call_0"), result("call_0", f"sunny {r}"), AIMessage(f"Sunny {r}."))]


def item_call(cid: str, n: int) -> dict[str, Any]:
    return {"type": "function_call", "call_id": cid, "name": "lookup", "arguments": f'{{"n": {n}}}'}


def item_output(cid: str, text: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": cid, "output": text}


def anthropic_round(r: int) -> list[BaseMessage]:
    """A round as ChatAnthropic replies with thinking on: the call a `tool_use` block of
    the content too, which the history keeps whole (the chat form cannot carry thinking)
    and gives back."""
    use = {"type": "tool_use", "id": "call_0", "name": "lookup", "input": {"n": 0}}
    thinking = {"type": "thinking", "thinking": "Look it up.", "signature": f"sig{r}"}
    return [ask(f"weather {r}?"),
            AIMessage([thinking, {"type": "text", "text": "Checking."}, use],
                      tool_calls=[{"id": "call_0", "name": "lookup", "args": {"n": 0}}]),
            result("call_0", f"sunny {r}")]


# each case: what is stored (LangChain messages, through the history, or rows, appended as
# they are), and the (id sent, its `n`, its result's text) of every call in request order
CASES: list[tuple[str, list[BaseMessage] | list[dict[str, Any]], list[tuple[str, Any, str]]]] = [
    # a server that numbers calls per reply: the second round's call_0 gets a suffix
    ("call_0 in two rounds", per_reply_rounds(2), [("call_0", 0, "sunny 0"), ("call_0_2", 0, "sunny 1")]),
    # and the third the next free one
    ("call_0 in three rounds", per_reply_rounds(3),
     [("call_0", 0, "sunny 0"), ("call_0_2", 0, "sunny 1"), ("call_0_3", 0, "sunny 2")]),
    # the Agents SDK's items, call_0 per reply, read back as LangChain messages
    ("Responses items, call_0 in two rounds",
     [{"role": "user", "content": "a"}, item_call("call_0", 0), item_output("call_0", "one"),
      {"role": "user", "content": "b"}, item_call("call_0", 1), item_output("call_0", "two")],
     [("call_0", 0, "one"), ("call_0_2", 1, "two")]),
    # two items of one round sharing a call_id: one AI message, the second pair renamed
    ("one round, two calls of c1",
     [{"role": "user", "content": "go"}, item_call("c1", 1), item_call("c1", 2), item_output("c1", "a"),
      item_output("c1", "b")],
     [("c1", 1, "a"), ("c1_2", 2, "b")]),
    # a call whose arguments are not JSON is an invalid tool call, its id renamed too
    ("an invalid call in the second round",
     [{"role": "user", "content": "a"}, item_call("call_0", 0), item_output("call_0", "one"),
      {"role": "user", "content": "b"},
      {"type": "function_call", "call_id": "call_0", "name": "lookup", "arguments": "{oops"},
      item_output("call_0", "two")],
     [("call_0", 0, "one"), ("call_0_2", None, "two")]),
    # ChatAnthropic's replies: the content's tool_use block goes with its call
    ("tool_use blocks in two rounds", [*anthropic_round(0), *anthropic_round(1)],
     [("call_0", 0, "sunny 0"), ("call_0_2", 0, "sunny 1")]),
    # ids of their own: sent as stored (passes before and after)
    ("fresh ids", [ask("a"), calls("call_a", "call_b"), result("call_b", "b"), result("call_a", "a")],
     [("call_a", 0, "a"), ("call_b", 1, "b")]),
]


def sent_calls(msgs: list[BaseMessage]) -> list[tuple[str, Any, str]]:
    """(id, its `n`, its result's text) of each call, the result found by id."""
    out = []
    for m in msgs:
        if isinstance(m, AIMessage):
            for c in [*m.tool_calls, *m.invalid_tool_calls]:
                answers = [r.content for r in msgs if isinstance(r, ToolMessage) and r.tool_call_id == c["id"]]
                args = c["args"] if isinstance(c["args"], dict) else None
                out.append((c["id"], args and args.get("n"), answers[0] if len(answers) == 1 else f"{len(answers)}"))
    return out


def chat_form_problems(msgs: list[BaseMessage]) -> list[str]:
    """provider_rules' chat checks of LangChain's own conversion to the chat form, which
    leaves an invalid tool call out (ChatOpenAI's sends it), so its result would read as
    an orphan: such messages are held to `sent_calls` alone."""
    if any(isinstance(m, AIMessage) and m.invalid_tool_calls for m in msgs):
        return []
    return chat_problems(convert_to_openai_messages(msgs))


def check_blocks(msgs: list[BaseMessage]) -> None:
    """A content block that is a call names its call's id: the integration sends it so."""
    for m in msgs:
        if isinstance(m, AIMessage) and isinstance(m.content, list):
            uses = [b["id"] for b in m.content if isinstance(b, dict) and b.get("type") == "tool_use"]
            assert uses == [c["id"] for c in m.tool_calls]


def store(mem: Memory, conv: str, stored: list[BaseMessage] | list[dict[str, Any]]) -> None:
    if stored and isinstance(stored[0], BaseMessage):
        TiermemChatMessageHistory(mem, conv).add_messages(stored)  # type: ignore[arg-type]
    else:
        mem.append_many(conv, stored)  # type: ignore[arg-type]


@pytest.mark.parametrize(("stored", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_history_messages_send_each_call_id_once(cold_memory: Memory, stored: list[Any],
                                                 expected: list[tuple[str, Any, str]]) -> None:
    store(cold_memory, "c", stored)
    got = TiermemChatMessageHistory(cold_memory, "c").messages
    assert sent_calls(got) == expected
    check_blocks(got)
    assert chat_form_problems([*got, ask("thanks")]) == []
    # the rows keep the ids appended
    kept = [m.body for m in cold_memory.history("c")]
    if isinstance(stored[0], dict):
        assert kept == stored


@pytest.mark.parametrize("fmt", ["as_stored", "chat", "responses"])
@pytest.mark.parametrize(("stored", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_hooks_context_sends_each_call_id_once(tmp_path: Path, embedder: Embedder, fmt: str, stored: list[Any],
                                               expected: list[tuple[str, Any, str]]) -> None:
    """The context the LangGraph hooks (and the create_agent middleware, the same
    `ConversationSync`) give the model, whatever form the memory's contexts take."""
    with Memory(Config(data_dir=tmp_path, context_format=fmt), embedder=embedder,  # type: ignore[arg-type]
                hot=False, background_indexing=False) as mem:
        store(mem, "c", stored)
        msgs = TiermemHooks(mem, "c", budget=BUDGET).pre_model_hook({"messages": [ask("thanks")]})["llm_input_messages"]
    assert sent_calls(msgs) == expected
    assert chat_form_problems(msgs) == []


def test_an_earlier_id_stays_as_the_history_grows(cold_memory: Memory) -> None:
    """An id depends only on what comes before it: appending a round leaves the ids the
    model was sent before (its prompt cache's prefix) as they were."""
    history = TiermemChatMessageHistory(cold_memory, "c")
    history.add_messages(per_reply_rounds(2))
    before = history.messages
    history.add_messages([ask("more"), calls("call_0_2", "call_0"), result("call_0", "x"), result("call_0_2", "y")])
    after = history.messages
    assert after[:len(before)] == before
    assert [cid for cid, _n, _text in sent_calls(after)] == ["call_0", "call_0_2", "call_0_2_2", "call_0_3"]
    assert chat_form_problems(after) == []
