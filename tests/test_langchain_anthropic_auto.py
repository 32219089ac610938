"""The LangChain adapters' default `system_messages=None` picks the form per model call
from the model the call goes to (`tiermem.adapters.langchain.system_messages_for`):
"in_turn" for an Anthropic chat model (langchain-anthropic's `ChatAnthropic`, bound
with `bind_tools`, in a sequence, configurable), "as_is" for any other and where it
cannot be told; a value given wins.

Before, the default was "as_is" for every model, so an agent on Claude built the
obvious way (`TiermemMiddleware(mem)`, `create_agent(ChatAnthropic(...))`) failed at its
first call that retrieved anything: `ChatAnthropic` raised "Received multiple
non-consecutive system messages" before sending.

Against the real packages and the scripted Messages API server of
`test_langchain_anthropic_system` (a real HTTP server on 127.0.0.1); every request it
receives is checked against Anthropic's request rules (`tests/provider_rules.py`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain.agents")
pytest.importorskip("langchain_anthropic")
from langchain.agents import create_agent
from langchain.chat_models import init_chat_model
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import ConfigurableField
from langchain_helpers import RecordingFakeModel, weather
from provider_rules import anthropic_problems
from test_langchain_anthropic_system import (
    BUDGET_TOKENS,
    CONVERSATION,
    LISBON_NOTE,
    MODEL,
    SCRIPT,
    TURNS,
    MessagesServer,
    _prefill,
    messages_server,  # noqa: F401  # the `server` fixture
)

from tiermem import Config, Memory
from tiermem.adapters.langchain import system_messages_for
from tiermem.adapters.langchain_agent import TiermemMiddleware
from tiermem.adapters.langgraph import TiermemHooks
from tiermem.planner.render import HEADERS
from tiermem.tiers.embed import Embedder

# the session embedder with each distinct text's vector computed once for the session
# (conftest.shared_vectors): every test prefills memories with the same notes, re-embedded
# for each new store (~1 s a store); what is checked is the messages the adapters send
pytestmark = pytest.mark.usefixtures("shared_vectors")

THREAD = {"configurable": {"thread_id": CONVERSATION}}


class OpenAIStyleModel(RecordingFakeModel):
    """The recording fake model, of ChatOpenAI's `_llm_type`: a model that takes a system
    message anywhere."""

    @property
    def _llm_type(self) -> str:
        return "openai-chat"


class VertexStyleClaude(RecordingFakeModel):
    """A model outside langchain-anthropic reaching Claude through its message format
    (langchain-google-vertexai's `ChatAnthropicVertex` says "anthropic-chat-vertexai")."""

    @property
    def _llm_type(self) -> str:
        return "anthropic-chat-vertexai"


class SubclassedClaude(ChatAnthropic):
    """A caller's own subclass of ChatAnthropic (its `_llm_type` kept)."""


def _claude(server: MessagesServer | None = None) -> ChatAnthropic:
    return server.model() if server else ChatAnthropic(model=MODEL, api_key="test-key")


def _fake() -> OpenAIStyleModel:
    return OpenAIStyleModel(messages=iter([]))


def _switchable(default: str) -> Any:
    """A configurable_alternatives model: "claude" or "fake", `default` unless the config picks."""
    claude, fake = _claude(), _fake()
    first, other = (claude, fake) if default == "claude" else (fake, claude)
    return first.configurable_alternatives(ConfigurableField(id="llm"), default_key=default,
                                           **{"fake" if default == "claude" else "claude": other})


def _picks(which: str) -> dict[str, Any]:
    return {"configurable": {"llm": which}}


# (the model, the run's config, the form the default picks)
FORMS = [
    pytest.param(_claude, None, "in_turn", id="chatanthropic"),
    pytest.param(lambda: _claude().bind_tools([weather]), None, "in_turn", id="bound-tools"),  # a RunnableBinding
    pytest.param(lambda: _claude().bind(stop=["x"]).with_config(tags=["t"]), None, "in_turn",
                 id="bound-twice"),  # a binding of a binding
    pytest.param(lambda: ChatPromptTemplate.from_messages([("user", "{q}")]) | _claude(), None, "in_turn",
                 id="prompt-sequence"),  # prompt | model, as create_react_agent reads it
    pytest.param(lambda: SubclassedClaude(model=MODEL, api_key="k"), None, "in_turn", id="subclass"),
    pytest.param(lambda: VertexStyleClaude(messages=iter([])), None, "in_turn", id="anthropic-llm-type"),
    pytest.param(_fake, None, "as_is", id="openai-style"),  # ChatOpenAI's _llm_type
    pytest.param(lambda: _fake().bind(stop=["x"]), None, "as_is", id="openai-style-bound"),
    pytest.param(lambda: _switchable("fake"), _picks("claude"), "in_turn", id="alternative-picked"),
    pytest.param(lambda: _switchable("claude"), _picks("fake"), "as_is", id="alternative-away"),
    pytest.param(lambda: _switchable("claude"), None, "in_turn", id="alternative-default"),
    # init_chat_model's configurable model, read without making the model
    pytest.param(lambda: init_chat_model(MODEL, configurable_fields="any"), None, "in_turn", id="init-claude"),
    pytest.param(lambda: init_chat_model(MODEL, configurable_fields="any"), {"configurable": {"model": "gpt-4o"}},
                 "as_is", id="init-picked-openai"),
    pytest.param(lambda: init_chat_model(configurable_fields=("model",)).bind_tools([weather]),
                 {"configurable": {"model": "anthropic:claude-opus-4-1"}}, "in_turn", id="init-prefix-bound"),
    pytest.param(lambda: init_chat_model(configurable_fields=("model", "model_provider")),
                 {"configurable": {"model": "my-deployment", "model_provider": "anthropic_bedrock"}}, "in_turn",
                 id="init-provider"),
    pytest.param(lambda: init_chat_model(configurable_fields=("model",)), None, "as_is",
                 id="init-unnamed"),  # no model named: cannot be told
    pytest.param(lambda: None, None, "as_is", id="no-model"),  # TiermemHooks made without one
    pytest.param(lambda: (lambda state, runtime: _claude()), None, "as_is",
                 id="model-function"),  # create_react_agent's dynamic model: cannot be told
]


@pytest.mark.parametrize(("make", "config", "form"), FORMS)
def test_the_form_for_a_model(make: Callable[[], Any], config: dict[str, Any] | None, form: str) -> None:
    assert system_messages_for(make(), config) == form  # type: ignore[arg-type]


def _middleware_agent(model: Any, mem: Memory, **kw: Any) -> Any:
    return create_agent(model, [weather], middleware=[TiermemMiddleware(mem, CONVERSATION, budget=BUDGET_TOKENS,
                                                                        shared_across_threads=True, **kw)])


def _hooks_agent(model: Any, mem: Memory, **kw: Any) -> Any:
    from langgraph.prebuilt import create_react_agent

    hooks = TiermemHooks(mem, CONVERSATION, budget=BUDGET_TOKENS, shared_across_threads=True, model=model, **kw)
    return create_react_agent(model, [weather], pre_model_hook=hooks.pre_model_hook,
                              post_model_hook=hooks.post_model_hook)


def _hooks_agent_bound(model: Any, mem: Memory, **kw: Any) -> Any:
    return _hooks_agent(model.bind_tools([weather]), mem, **kw)


ADAPTERS = [
    pytest.param(_middleware_agent, id="agent-middleware"),  # create_agent: the model the request carries
    pytest.param(_hooks_agent, id="langgraph-hooks"),  # create_react_agent: the model the hooks are given
    pytest.param(_hooks_agent_bound, id="langgraph-hooks-bound"),  # ... bound with bind_tools
]
Build = Callable[..., Any]


def _blocks(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def _texts(blocks: list[dict[str, Any]]) -> str:
    return "\n".join(b.get("text", "") for b in blocks)


def _run(agent: Any) -> None:
    for turn in TURNS:
        agent.invoke({"messages": [HumanMessage(turn)]}, THREAD)


def _check_anthropic_requests(bodies: list[dict[str, Any]]) -> None:
    """Every request is one the API takes, the retrieved turns were sent, in a user turn."""
    assert len(bodies) == len(SCRIPT)  # turn 1's call, turn 2's tool round and answer
    for body in bodies:
        system_blocks = _blocks(body.get("system") or [])
        messages = [{**m, "content": _blocks(m["content"])} for m in body["messages"]]
        assert anthropic_problems(system_blocks, messages) == []
        assert HEADERS["retrieved"] not in _texts(system_blocks)  # never moved into `system`
    first = json.dumps(bodies[0])
    assert LISBON_NOTE in first and HEADERS["retrieved"] in first


@pytest.mark.parametrize("system", [
    "You are a travel agent.",  # the adapter's system prompt opens the context
    None,  # none: a pinned block opens it
])
@pytest.mark.parametrize("build", ADAPTERS)
def test_the_default_runs_an_agent_on_chatanthropic(cold_memory: Memory, server: MessagesServer, build: Build,
                                                    system: str | None) -> None:
    _prefill(cold_memory)
    _run(build(server.model(), cold_memory, system=system))  # no system_messages given
    _check_anthropic_requests(server.bodies)


def test_the_default_follows_the_model_the_run_configures(cold_memory: Memory, server: MessagesServer) -> None:
    # init_chat_model's configurable model: the provider is read from the run's config per call
    _prefill(cold_memory)
    model = init_chat_model("gpt-4o", configurable_fields=("model", "base_url", "api_key", "max_tokens"))
    agent = _middleware_agent(model, cold_memory)
    for turn in TURNS:
        agent.invoke({"messages": [HumanMessage(turn)]},
                     {"configurable": {"thread_id": CONVERSATION, "model": f"anthropic:{MODEL}", "base_url": server.url,
                                       "api_key": "test-key", "max_tokens": 256}})
    _check_anthropic_requests(server.bodies)


def _fake_script() -> list[AIMessage]:
    # ids given: the two runs' states (and so the inputs) hold the same ids
    return [AIMessage("Note 3 was about Lisbon.", id="a1"),
            AIMessage("", id="a2", tool_calls=[{"id": "call_1", "name": "weather", "args": {"city": "Lisbon"}}]),
            AIMessage("Sunny and 21C in Lisbon.", id="a3")]


def _fake_inputs(build: Build, mem: Memory, **kw: Any) -> list[list[BaseMessage]]:
    model = OpenAIStyleModel(messages=iter(_fake_script()))
    model.received = []
    agent = build(model, mem, system="You are a travel agent.", **kw)
    for i, turn in enumerate(TURNS):
        agent.invoke({"messages": [HumanMessage(turn, id=f"h{i}")]}, THREAD)
    return model.received


def _dumped(inputs: list[list[BaseMessage]]) -> str:
    return json.dumps([[m.model_dump() for m in call] for call in inputs], sort_keys=True, default=str)


def _memory(tmp_path: Path, embedder: Embedder, name: str) -> Memory:
    return Memory(Config(data_dir=tmp_path / name), embedder=embedder, hot=False, background_indexing=False)


@pytest.mark.parametrize("build", ADAPTERS)
def test_the_default_leaves_an_openai_style_model_as_is(tmp_path: Path, embedder: Embedder, build: Build) -> None:
    with _memory(tmp_path, embedder, "default") as default_mem, _memory(tmp_path, embedder, "as_is") as as_is_mem:
        _prefill(default_mem)
        _prefill(as_is_mem)
        default = _fake_inputs(build, default_mem)
        as_is = _fake_inputs(build, as_is_mem, system_messages="as_is")
    assert len(default) == len(_fake_script())
    assert _dumped(default) == _dumped(as_is)  # byte for byte what "as_is" sends
    # and as_is it is: the retrieved turns a system message between the turns
    assert any(isinstance(m, SystemMessage) and HEADERS["retrieved"] in m.text and i > 0
               and not isinstance(call[i - 1], SystemMessage)
               for call in default for i, m in enumerate(call))


@pytest.mark.parametrize("build", ADAPTERS)
def test_a_value_given_wins(tmp_path: Path, embedder: Embedder, server: MessagesServer, build: Build) -> None:
    with _memory(tmp_path, embedder, "claude") as claude_mem, _memory(tmp_path, embedder, "fake") as fake_mem:
        _prefill(claude_mem)
        _prefill(fake_mem)
        # "as_is" on ChatAnthropic: sent as planned, which ChatAnthropic refuses before sending
        with pytest.raises(ValueError, match="non-consecutive system messages"):
            _run(build(server.model(), claude_mem, system="You are a travel agent.", system_messages="as_is"))
        assert server.bodies == []
        # "in_turn" on an OpenAI-style model: no system message after the conversation began
        inputs = _fake_inputs(build, fake_mem, system_messages="in_turn")
    assert len(inputs) == len(_fake_script())
    for call in inputs:
        kinds = [isinstance(m, SystemMessage) for m in call]
        assert kinds == sorted(kinds, reverse=True)  # system messages only ahead of the turns
    assert any(isinstance(m, HumanMessage) and HEADERS["retrieved"] in m.text for call in inputs for m in call)


def test_hooks_without_a_model_cannot_tell(cold_memory: Memory, server: MessagesServer) -> None:
    # a hook does not see the graph's model: made without one, they send "as_is" as before
    from langgraph.prebuilt import create_react_agent

    _prefill(cold_memory)
    hooks = TiermemHooks(cold_memory, CONVERSATION, budget=BUDGET_TOKENS, system="You are a travel agent.")
    agent = create_react_agent(server.model(), [weather], pre_model_hook=hooks.pre_model_hook,
                               post_model_hook=hooks.post_model_hook)
    with pytest.raises(ValueError, match="non-consecutive system messages"):
        _run(agent)
    assert server.bodies == []
