"""Anthropic prompt-cache marks through the LangChain adapters: `TiermemMiddleware(...,
cache_marks=N)` (`create_agent`) and `TiermemHooks(..., cache_marks=N)`
(`create_react_agent`) give the model at most N content blocks with
`cache_control: {"type": "ephemeral"}` (the key langchain-anthropic's `ChatAnthropic`
sends with a block) where the plan's breakpoints end, placed as `to_anthropic` places
them (`chosen_breakpoints`, one home): the end of the stable prefix first, never on a
blank block or a prefill's trimmed text. Against the real langchain-core / langgraph
packages with their fake chat model (no network).

Before, the adapters sent LangChain messages without marks, so an agent on
`ChatAnthropic` paid the uncached price every call (Anthropic serves a cached read only
up to a mark); `cache_marks` did not exist (the adapters refused the keyword) and neither
did `tiermem.adapters.langchain.context_input`.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Callable, Sequence
from typing import Any

import pytest

pytest.importorskip("langchain.agents")
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_helpers import RecordingFakeModel, weather

from tiermem import Memory
from tiermem.adapters.anthropic import AnthropicRequest, to_anthropic
from tiermem.adapters.langchain import context_input
from tiermem.adapters.langchain_agent import TiermemMiddleware
from tiermem.adapters.langgraph import TiermemHooks
from tiermem.errors import ValidationError
from tiermem.planner.plan import MAX_BREAKPOINTS, Breakpoint, Context

BUDGET_TOKENS = 2000
SYSTEM = "You are a travel agent. Answer in one line."
EPHEMERAL = {"type": "ephemeral"}
CALLS = [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Lisbon"}'}}]
PNG = "data:image/png;base64,iVBORw0KGgo="

# (log appended, the query planned for): contexts whose breakpoints land on each kind of message
SCENARIOS = [
    # plain turns: the system layer, the stable prefix (the reply before the question), the whole context
    pytest.param([{"role": "user", "content": "I want to fly to Lisbon."},
                  {"role": "assistant", "content": "Noted: daytime flights only."},
                  {"role": "user", "content": "Which airline is cheapest?"}],
                 "Which airline is cheapest?", id="plain-turns"),
    # a tool loop: the context ends on a tool result (a ToolMessage's text block: a tool_result)
    pytest.param([{"role": "user", "content": "I want to fly to Lisbon."},
                  {"role": "assistant", "content": "Noted: daytime flights only."},
                  {"role": "user", "content": "Weather in Lisbon?"},
                  {"role": "assistant", "content": None, "tool_calls": CALLS},
                  {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 24C"}],
                 "Weather in Lisbon?", id="tool-loop"),
    # the stable prefix ends on a blank reply, which sends nothing: the message before takes its mark
    pytest.param([{"role": "user", "content": "Book the 9am one."},
                  {"role": "assistant", "content": ""},
                  {"role": "user", "content": "Did it go through?"}],
                 "Did it go through?", id="blank-reply"),
    # the context ends on a reply with trailing whitespace (prefill, sent cut): the block before is marked
    pytest.param([{"role": "user", "content": "Book the 9am one."},
                  {"role": "assistant", "content": "Booked TP1351 at 9:05."},
                  {"role": "user", "content": "Thanks."},
                  {"role": "assistant", "content": "You're welcome.  \n"}],
                 None, id="prefill-trimmed"),
]


def _marks(messages: Sequence[BaseMessage]) -> list[tuple[int, str]]:
    """Each marked block: (its message's index, its text), in order; every mark ephemeral."""
    out: list[tuple[int, str]] = []
    for k, m in enumerate(messages):
        for part in m.content if isinstance(m.content, list) else ():
            if isinstance(part, dict) and "cache_control" in part:
                assert part["cache_control"] == EPHEMERAL
                assert part["type"] == "text" and part["text"].strip()  # never a blank block
                out.append((k, part["text"]))
    return out


def _anthropic_marks(req: AnthropicRequest) -> list[str]:
    """The text of each block `to_anthropic` marked, in request order."""
    texts: list[str] = []
    for b in [*req.system, *(b for m in req.messages for b in m["content"])]:
        if "cache_control" in b:
            content = b["text"] if b["type"] == "text" else b.get("content", b["type"])
            texts.append(content if isinstance(content, str) else "".join(p["text"] for p in content))
    return texts


def _plain(messages: Sequence[BaseMessage]) -> list[str]:
    """Each message as ChatAnthropic sends it, marks aside (a string content is one text
    block), as JSON: what Anthropic's prompt cache keys on."""
    def blocks(content: str | list[Any]) -> list[Any]:
        if isinstance(content, str):
            return [{"type": "text", "text": content}] if content else []
        return [{k: v for k, v in p.items() if k != "cache_control"} if isinstance(p, dict)
                else {"type": "text", "text": p} for p in content]
    return [json.dumps({"type": m.type, "content": blocks(m.content), "tool_calls": getattr(m, "tool_calls", None),
                        "tool_call_id": getattr(m, "tool_call_id", None)}, sort_keys=True) for m in messages]


def _context(mem: Memory, log: list[dict[str, Any]], query: str | None) -> Context:
    mem.append_many("trip", log)
    return mem.context("trip", query, BUDGET_TOKENS, system=SYSTEM)


@pytest.mark.parametrize("cache_marks", range(MAX_BREAKPOINTS + 1))
@pytest.mark.parametrize(("log", "query"), SCENARIOS)
def test_marks_are_where_to_anthropic_puts_them(cold_memory: Memory, log: list[dict[str, Any]],
                                                query: str | None, cache_marks: int) -> None:
    ctx = _context(cold_memory, log, query)
    assert len({b.index for b in ctx.plan.breakpoints}) >= 2  # the case has more breakpoints than one mark
    unmarked = context_input(ctx)
    marked = context_input(ctx, cache_marks)
    expected = _anthropic_marks(to_anthropic(ctx, cold_memory, max_breakpoints=cache_marks))
    assert [text for _k, text in _marks(marked)] == expected
    every = _anthropic_marks(to_anthropic(ctx, cold_memory, max_breakpoints=MAX_BREAKPOINTS))
    assert len(expected) == min(cache_marks, len(every))  # at most N, the most valuable (to_anthropic's)
    assert _marks(unmarked) == []  # 0, the default: no marks (OpenAI needs none)
    # the same messages and text: only the marked messages changed, to a list of blocks
    assert _plain(marked) == _plain(unmarked)
    at = {k for k, _text in _marks(marked)}
    assert [m for k, m in enumerate(marked) if k not in at] == [m for k, m in enumerate(unmarked) if k not in at]


def test_one_mark_goes_to_the_end_of_the_stable_prefix(cold_memory: Memory) -> None:
    ctx = _context(cold_memory, [{"role": "user", "content": "I want to fly to Lisbon."},
                                 {"role": "assistant", "content": "Noted: daytime flights only."},
                                 {"role": "user", "content": "Which airline is cheapest?"}],
                   "Which airline is cheapest?")
    stable = next(b for b in ctx.plan.breakpoints if b.layer == "stable")
    assert ctx.messages[stable.index]["content"] == "Noted: daytime flights only."
    assert [text for _k, text in _marks(context_input(ctx, 1))] == ["Noted: daytime flights only."]


LOOP_LOG: list[dict[str, Any]] = [
    {"role": "user", "content": "Weather in Lisbon?"},
    {"role": "assistant", "content": None, "tool_calls": CALLS},
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 24C"},
    {"role": "assistant", "content": "Let me check Porto too.",
     "tool_calls": [{"id": "call_2", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Porto"}'}}]},
    {"role": "tool", "tool_call_id": "call_2", "content": "rain, 15C"},
    {"role": "user", "content": [{"type": "text", "text": "And is this hotel near the beach?"},
                                 {"type": "image_url", "image_url": {"url": PNG}}]},
]


def _at(ctx: Context, content: object) -> int:
    return next(i for i, m in enumerate(ctx.messages) if m.get("content") == content)


# (which message a breakpoint ends on, the text that takes its mark): where ChatAnthropic
# drops a mark (it rebuilds tool_use blocks from tool_calls and an image_url part as an
# image block, without the key), the last text block before it takes it
FORM_RULES = [
    # an AI message of calls only: the message before it (the question)
    pytest.param(lambda ctx: _at(ctx, "Weather in Lisbon?"), "Weather in Lisbon?", id="calls-only"),
    # an AI message with text and calls: its text, which ChatAnthropic sends before the calls
    pytest.param(lambda ctx: _at(ctx, "Let me check Porto too."), "Let me check Porto too.", id="text-and-calls"),
    # a tool result: its text (ChatAnthropic moves the mark to the tool_result block)
    pytest.param(lambda ctx: _at(ctx, "sunny, 24C"), "sunny, 24C", id="tool-result"),
    # a user message ending in an image: its text part
    pytest.param(lambda ctx: len(ctx.messages) - 1, "And is this hotel near the beach?", id="image-last"),
    # a breakpoint past the messages (a plan not of these): no mark, as to_anthropic
    pytest.param(lambda ctx: len(ctx.messages), None, id="past-the-end"),
]


@pytest.mark.parametrize(("where", "text"), FORM_RULES)
def test_a_mark_chatanthropic_would_drop_goes_to_the_text_before(cold_memory: Memory, where: Callable[[Context], int],
                                                                 text: str | None) -> None:
    ctx = _context(cold_memory, LOOP_LOG, "Is the hotel near the beach?")
    index = where(ctx)
    ctx = dataclasses.replace(ctx, plan=dataclasses.replace(ctx.plan, breakpoints=[Breakpoint(index, "stable", 100)]))
    marked = context_input(ctx, MAX_BREAKPOINTS)
    assert [t for _k, t in _marks(marked)] == ([] if text is None else [text])
    assert _plain(marked) == _plain(context_input(ctx))


def _middleware_agent(model: RecordingFakeModel, cache_marks: int) -> tuple[Any, Any]:
    return create_agent(model, [weather], middleware=[TiermemMiddleware(
        _MEM[0], budget=BUDGET_TOKENS, system=SYSTEM, cache_marks=cache_marks)]), None


def _hooks_agent(model: RecordingFakeModel, cache_marks: int) -> tuple[Any, Any]:
    from langgraph.prebuilt import create_react_agent

    hooks = TiermemHooks(_MEM[0], budget=BUDGET_TOKENS, system=SYSTEM, cache_marks=cache_marks)
    return create_react_agent(model, [weather], pre_model_hook=hooks.pre_model_hook,
                              post_model_hook=hooks.post_model_hook), hooks


_MEM: list[Memory] = []  # the test's memory, for the builders above
ADAPTERS = [
    pytest.param(_middleware_agent, id="agent-middleware"),  # create_agent's middleware
    pytest.param(_hooks_agent, id="langgraph-hooks"),  # create_react_agent's pre/post hooks
]


def _script() -> list[AIMessage]:
    return [AIMessage("", tool_calls=[{"id": "call_1", "name": "weather", "args": {"city": "Lisbon"}}]),
            AIMessage("Sunny in Lisbon."), AIMessage("You asked about Lisbon."), AIMessage("Porto is 3h by train.")]


TURNS = ["Weather in Lisbon?", "Which city did I ask about?", "How far is Porto from there?"]


def _run(build: Callable[[RecordingFakeModel, int], tuple[Any, Any]], cache_marks: int,
         thread: str) -> list[list[BaseMessage]]:
    model = RecordingFakeModel(messages=iter(_script()))
    model.received = []
    agent, _hooks = build(model, cache_marks)
    for turn in TURNS:
        agent.invoke({"messages": [HumanMessage(turn)]}, {"configurable": {"thread_id": thread}})
    return model.received


@pytest.mark.parametrize("build", ADAPTERS)
def test_the_model_receives_the_marks_and_the_prefix_holds(cold_memory: Memory,
                                                          build: Callable[[RecordingFakeModel, int], Any]) -> None:
    _MEM[:] = [cold_memory]
    marked = _run(build, MAX_BREAKPOINTS, "marked")
    unmarked = _run(build, 0, "unmarked")  # the default: the same agent, another conversation
    assert len(marked) == len(unmarked) == 4  # a tool round, then one call a turn
    for got, plain in zip(marked, unmarked, strict=True):
        assert _marks(plain) == []
        marks = _marks(got)
        assert 1 <= len(marks) <= MAX_BREAKPOINTS
        assert _plain(got) == _plain(plain)  # the same input but for the marks
    # one epoch: each call's input through each of its marks is the next call's, byte for
    # byte as ChatAnthropic sends it (what the marks wrote is what the next call reads)
    for first, second in itertools.pairwise(marked):
        for k, _text in _marks(first):
            assert _plain(second[:k + 1]) == _plain(first[:k + 1])
    # where: the system layer every call; from the second turn on, the end of the stable
    # prefix (the last reply before the question) and the whole context (the question)
    assert [[text for _k, text in _marks(got)] for got in marked] == [
        [SYSTEM],  # turn 1: the conversation's first call, all of it its own part
        [SYSTEM],  # turn 1's tool round: its own part still
        [SYSTEM, "Sunny in Lisbon.", "Which city did I ask about?"],
        [SYSTEM, "You asked about Lisbon.", "How far is Porto from there?"]]


@pytest.mark.parametrize("bad", [
    -1,  # below 0
    MAX_BREAKPOINTS + 1,  # past Anthropic's limit of 4 marks a request
    True,  # a bool is no count
    2.0,  # a float neither
    "2",  # nor a string
])
@pytest.mark.parametrize("adapter", [TiermemMiddleware, TiermemHooks])
def test_a_bad_cache_marks_is_refused_when_the_adapter_is_made(cold_memory: Memory, adapter: type,
                                                               bad: object) -> None:
    with pytest.raises(ValidationError, match=r"cache_marks.*0\.\.4"):
        adapter(cold_memory, budget=BUDGET_TOKENS, cache_marks=bad)
