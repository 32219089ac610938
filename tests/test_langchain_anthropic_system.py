"""A LangChain agent on langchain-anthropic's `ChatAnthropic` with tiermem memory blocks
between the turns: `TiermemMiddleware(..., system_messages="in_turn")` (`create_agent`)
and `TiermemHooks(..., system_messages="in_turn")` (`create_react_agent`) send the
context as `to_anthropic` does (`tiermem.adapters.langchain.in_turn`): the system
messages it opens with as one system message, a memory block after the conversation
began (the retrieved turns before the latest message) as text of the user turn it sits
in, an opening reply after a user message of `CONTINUED_TEXT`.

Before, the adapters put the retrieved turns in a `SystemMessage` just before the latest
message, and `ChatAnthropic._format_messages` raises "Received multiple non-consecutive
system messages" on that whenever a system message opens the context (the adapter's
`system`, a pinned block): an agent on Claude failed at its first call that retrieved
anything; `system_messages` did not exist (the adapters refused the keyword). "as_is"
(for OpenAI, which takes a system message anywhere) sends them as before; the default
picks per model (test_langchain_anthropic_auto).

Against the real packages (langchain, langgraph, langchain-anthropic, the anthropic SDK)
and a real HTTP server on 127.0.0.1 standing in for the Messages API, answering from a
script; every request it receives is checked against Anthropic's request rules
(`tests/provider_rules.py`).
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain.agents")
pytest.importorskip("langchain_anthropic")
from langchain.agents import create_agent
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_helpers import weather
from provider_rules import anthropic_problems

from tiermem import Config, Memory
from tiermem.adapters.anthropic import CONTINUED_TEXT
from tiermem.adapters.langchain import in_turn
from tiermem.adapters.langchain_agent import TiermemMiddleware
from tiermem.adapters.langgraph import TiermemHooks
from tiermem.errors import ValidationError
from tiermem.planner.render import HEADERS
from tiermem.tiers.embed import Embedder

# the session embedder with each distinct text's vector computed once for the session
# (conftest.shared_vectors): every test prefills memories with the same notes, re-embedded
# for each new store (~1 s a store); what is checked is the messages the adapters send
pytestmark = pytest.mark.usefixtures("shared_vectors")

# small enough that most of the prefilled log is evicted and the notes come back retrieved
BUDGET_TOKENS = 600
MAX_TOKENS = 256  # the reply limit sent (the SDK refuses a non-streamed request it deems long)
MODEL = "claude-sonnet-4-5"  # a model whose profile takes no system message mid-conversation
SYSTEM = "You are a travel agent. Answer in one line."
CONVERSATION = "trip"
NOTES = 30
LISBON_NOTE = "Note 3: my favourite city is Lisbon."  # what the first question retrieves
FILLER = " filler" * 40  # tokens enough that a few notes fill the budget
TURNS = ["Which city was note 3 about?", "What is the weather in my favourite city?"]


def _prefill(mem: Memory) -> None:
    log: list[dict[str, Any]] = []
    for i in range(NOTES):
        note = LISBON_NOTE if i == 3 else f"Note {i}: town {i} is on my list."
        log += [{"role": "user", "content": note + FILLER}, {"role": "assistant", "content": f"Noted item {i}."}]
    mem.append_many(CONVERSATION, log)


def _reply(body: dict[str, Any], content: list[dict[str, Any]], stop: str) -> dict[str, Any]:
    return {"id": "msg_test", "type": "message", "role": "assistant", "model": body["model"], "content": content,
            "stop_reason": stop, "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}


# the script, one reply per request: turn 1 answers; turn 2 calls the tool, then answers
SCRIPT: list[tuple[list[dict[str, Any]], str]] = [
    ([{"type": "text", "text": "Note 3 was about Lisbon."}], "end_turn"),
    ([{"type": "tool_use", "id": "toolu_01", "name": "weather", "input": {"city": "Lisbon"}}], "tool_use"),
    ([{"type": "text", "text": "Sunny and 21C in Lisbon."}], "end_turn"),
]


class MessagesServer:
    """A real HTTP server answering POST /v1/messages from `SCRIPT`, keeping each body."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        bodies = self.bodies

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # http.server calls it by this name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                bodies.append(body)
                content, stop = SCRIPT[len(bodies) - 1]
                out = json.dumps(_reply(body, content, stop)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def model(self) -> ChatAnthropic:
        return ChatAnthropic(model=MODEL, api_key="test-key", base_url=self.url, max_tokens=MAX_TOKENS,
                             max_retries=0)


@pytest.fixture(name="server")
def messages_server() -> Iterator[MessagesServer]:
    """The scripted Messages API server, shut at the test's end (also test_langchain_anthropic_auto's)."""
    s = MessagesServer()
    yield s
    s.httpd.shutdown()
    s.httpd.server_close()


def _middleware_agent(model: ChatAnthropic, mem: Memory, **kw: Any) -> Any:
    return create_agent(model, [weather], middleware=[TiermemMiddleware(mem, CONVERSATION, budget=BUDGET_TOKENS,
                                                                        shared_across_threads=True, **kw)])


def _hooks_agent(model: ChatAnthropic, mem: Memory, **kw: Any) -> Any:
    from langgraph.prebuilt import create_react_agent

    hooks = TiermemHooks(mem, CONVERSATION, budget=BUDGET_TOKENS, shared_across_threads=True, **kw)
    return create_react_agent(model, [weather], pre_model_hook=hooks.pre_model_hook,
                              post_model_hook=hooks.post_model_hook)


ADAPTERS = [
    pytest.param(_middleware_agent, id="agent-middleware"),  # create_agent's middleware
    pytest.param(_hooks_agent, id="langgraph-hooks"),  # create_react_agent's pre/post hooks
]
Build = Callable[..., Any]


def _blocks(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A request's content as blocks (the API reads a string as one text block)."""
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def _texts(blocks: list[dict[str, Any]]) -> str:
    return "\n".join(b.get("text", "") for b in blocks)


def _flat(body: dict[str, Any]) -> list[tuple[int, str, str]]:
    """A request as Anthropic's prompt cache reads it, block by block in order: (message
    index, -1 for `system`; role; the block without its mark, as JSON)."""
    def plain(b: dict[str, Any]) -> str:
        return json.dumps({k: v for k, v in b.items() if k != "cache_control"}, sort_keys=True)
    return [(-1, "system", plain(b)) for b in _blocks(body.get("system") or [])] + [
        (i, m["role"], plain(b)) for i, m in enumerate(body["messages"]) for b in _blocks(m["content"])]


def _marked_at(body: dict[str, Any]) -> list[int]:
    """The indexes in `_flat(body)` of the blocks with a cache mark."""
    blocks = [*_blocks(body.get("system") or []), *(b for m in body["messages"] for b in _blocks(m["content"]))]
    return [k for k, b in enumerate(blocks) if "cache_control" in b]


def _run(build: Build, server: MessagesServer, mem: Memory, **kw: Any) -> None:
    agent = build(server.model(), mem, **kw)
    for turn in TURNS:
        agent.invoke({"messages": [HumanMessage(turn)]}, {"configurable": {"thread_id": CONVERSATION}})


@pytest.mark.parametrize(("system", "cache_marks"), [
    (SYSTEM, 4),  # the adapter's system prompt opens the context, every mark Anthropic takes
    (None, 0),  # no system prompt (a pinned block opens it), no marks
])
@pytest.mark.parametrize("build", ADAPTERS)
def test_an_agent_on_chatanthropic_runs_two_turns_with_retrieved_turns(
        cold_memory: Memory, server: MessagesServer, build: Build, system: str | None, cache_marks: int) -> None:
    _prefill(cold_memory)
    _run(build, server, cold_memory, system=system, cache_marks=cache_marks, system_messages="in_turn")
    assert len(server.bodies) == len(SCRIPT)  # turn 1's call, turn 2's tool round and answer
    retrieved = 0
    for body in server.bodies:
        system_blocks = _blocks(body.get("system") or [])
        messages = [{**m, "content": _blocks(m["content"])} for m in body["messages"]]
        assert anthropic_problems(system_blocks, messages) == []  # what the API takes
        if system is not None:
            assert system_blocks[0]["text"] == system  # the adapter's system prompt still leads
        # the retrieved block is never moved into `system` (the start of every request: the cache)
        assert HEADERS["retrieved"] not in _texts(system_blocks)
        in_user = [m for m in messages if m["role"] == "user" and HEADERS["retrieved"] in _texts(m["content"])]
        retrieved += bool(in_user)
        for m in in_user:  # text of a user turn, before its question, after any tool results
            kinds = [b["type"] for b in m["content"]]
            assert kinds == sorted(kinds, key=lambda t: t != "tool_result")
        marks = [b for b in [*system_blocks, *(b for m in messages for b in m["content"])] if "cache_control" in b]
        assert (1 <= len(marks) <= cache_marks) if cache_marks else not marks
    # the marks still pay (52dc831): each request through each of its marks is the start
    # of the next one, block for block (what a mark writes, the next call reads)
    for first, second in itertools.pairwise(server.bodies):
        for k in _marked_at(first):
            assert _flat(second)[:k + 1] == _flat(first)[:k + 1]
    # something was retrieved, and the note the first question asks about came back
    assert retrieved >= 1
    first = json.dumps(server.bodies[0])
    assert LISBON_NOTE in first and HEADERS["retrieved"] in first
    # the tool round went through: the last request answers the call the script made
    results = [b for m in server.bodies[-1]["messages"] for b in _blocks(m["content"]) if b["type"] == "tool_result"]
    assert [r["tool_use_id"] for r in results] == ["toolu_01"]


@pytest.mark.parametrize("policy", [
    "merge",  # Memory folds every system message into the leading one (the context opens with a reply)
    "before_latest",  # Memory puts every memory block in one system message before the latest
])
def test_in_turn_takes_each_memory_policy(tmp_path: Path, embedder: Embedder, server: MessagesServer,
                                          policy: str) -> None:
    with Memory(Config(data_dir=tmp_path / "data", system_messages=policy), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        _prefill(mem)
        _run(_middleware_agent, server, mem, system=SYSTEM, cache_marks=4, system_messages="in_turn")
    assert len(server.bodies) == len(SCRIPT)
    for body in server.bodies:
        messages = [{**m, "content": _blocks(m["content"])} for m in body["messages"]]
        assert anthropic_problems(_blocks(body.get("system") or []), messages) == []
    for first, second in itertools.pairwise(server.bodies):
        for k in _marked_at(first):
            assert _flat(second)[:k + 1] == _flat(first)[:k + 1]


@pytest.mark.parametrize("build", ADAPTERS)
def test_as_is_is_what_chatanthropic_refuses(cold_memory: Memory, server: MessagesServer, build: Build) -> None:
    # why the form exists: "as_is" (OpenAI's form, the default's for any other model) puts the
    # retrieved turns in a system message between the turns, which ChatAnthropic refuses
    # before sending (the default picks in_turn for it: test_langchain_anthropic_auto)
    _prefill(cold_memory)
    with pytest.raises(ValueError, match="non-consecutive system messages"):
        _run(build, server, cold_memory, system=SYSTEM, system_messages="as_is")
    assert server.bodies == []


PART = {"type": "text", "text": "pinned", "cache_control": {"type": "ephemeral"}}
# (a context's messages, what in_turn gives); the other cases in the agent tests above
IN_TURN = [
    # one leading system message, then the turns: unchanged
    pytest.param([SystemMessage("sys"), HumanMessage("q")], [SystemMessage("sys"), HumanMessage("q")], id="plain"),
    # a leading run: one system message of their blocks, a mark kept on its block
    pytest.param([SystemMessage("sys"), SystemMessage([PART]), HumanMessage("q")],
                 [SystemMessage([{"type": "text", "text": "sys"}, PART]), HumanMessage("q")], id="leading-run"),
    # a memory block between the turns: a human message, merged by ChatAnthropic into the question's turn
    pytest.param([SystemMessage("sys"), AIMessage("a"), SystemMessage("retrieved"), HumanMessage("q")],
                 [SystemMessage("sys"), HumanMessage(CONTINUED_TEXT), AIMessage("a"), HumanMessage("retrieved"),
                  HumanMessage("q")], id="between-turns"),
    # after a tool result: ChatAnthropic sends it after the result in that user turn
    pytest.param([HumanMessage("q"), AIMessage("", tool_calls=[{"id": "c1", "name": "weather", "args": {}}]),
                  ToolMessage("sunny", tool_call_id="c1"), SystemMessage("retrieved")],
                 [HumanMessage("q"), AIMessage("", tool_calls=[{"id": "c1", "name": "weather", "args": {}}]),
                  ToolMessage("sunny", tool_call_id="c1"), HumanMessage("retrieved")], id="after-tool-result"),
    # an empty system message between the turns: left out (it would be an empty user message)
    pytest.param([HumanMessage("q"), AIMessage("a"), SystemMessage(""), HumanMessage("q2")],
                 [HumanMessage("q"), AIMessage("a"), HumanMessage("q2")], id="empty-between"),
    # system messages alone: a user message after them (the API refuses no message)
    pytest.param([SystemMessage("sys")], [SystemMessage("sys"), HumanMessage(CONTINUED_TEXT)], id="system-only"),
    # an empty opening reply ChatAnthropic leaves out: the question after it opens, nothing added
    pytest.param([AIMessage(""), HumanMessage("q")], [AIMessage(""), HumanMessage("q")], id="blank-reply-opens"),
]


@pytest.mark.parametrize(("messages", "expected"), IN_TURN)
def test_in_turn(messages: list[BaseMessage], expected: list[BaseMessage]) -> None:
    got = in_turn(messages)
    assert [(type(m), m.content) for m in got] == [(type(m), m.content) for m in expected]


@pytest.mark.parametrize("bad", [
    "merge",  # Memory's policy (Config.system_messages), not the adapter's
    "",  # empty
    1,  # no string (None is the default: chosen per call by the model)
])
@pytest.mark.parametrize("adapter", [TiermemMiddleware, TiermemHooks])
def test_a_bad_system_messages_is_refused_when_the_adapter_is_made(cold_memory: Memory, adapter: type,
                                                                   bad: object) -> None:
    with pytest.raises(ValidationError, match=r"system_messages.*as_is, in_turn"):
        adapter(cold_memory, budget=BUDGET_TOKENS, system_messages=bad)
