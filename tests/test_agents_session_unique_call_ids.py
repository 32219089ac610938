"""The Agents SDK session's items send each call id once (`TiermemSession.get_items`
renames a repeat with its outputs, `tiers.formats.unique_item_call_ids`, as the
Responses form does), driven by the real `openai-agents` runner and its ScriptedModel
(no network), the items the SDK's own types.

Fails on the code before: a server that numbers its calls per reply (`call_0` every
round) left a session whose `get_items` returned `call_0` in every round. The runner
does not send that as it is: it merges the items of one `call_id` (the SDK's own
`deduplicate_input_items_preferring_latest`), so the model got the latest call's
arguments in the first call's place and the earlier rounds' outputs dropped (the run
after two rounds: one `function_call`, `{"n":1}`, with `value 1` after the next user
turn; `value 0` gone), and a Responses input holding both would be refused
("Duplicate ... call_id")."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

agents = pytest.importorskip("agents")
from agents import Agent, RunConfig, Runner, function_tool  # noqa: E402
from agents.testing import ScriptedModel, assistant_message, function_call  # noqa: E402
from provider_rules import responses_problems  # noqa: E402

from tiermem import Memory  # noqa: E402
from tiermem.adapters.openai_agents import TiermemSession  # noqa: E402

ROUNDS = 3  # runs, each one call to `lookup` numbered `call_0` by the server, then a reply
BUDGET = 4000  # tokens of the filter's context: room for the whole log, so nothing is cut


@function_tool
def lookup(n: int) -> str:
    """Look a number up."""
    return f"value {n}"


def _script() -> list[Any]:
    # item ids of their own, as a server's reply items have (the helper would use the call id)
    return [step for r in range(ROUNDS)
            for step in ([function_call("lookup", {"n": r}, call_id="call_0", item_id=f"fc_{r}")],
                         [assistant_message(f"done {r}", item_id=f"msg_{r}")])]


async def _run(session: TiermemSession, run_config: RunConfig) -> ScriptedModel:
    model = ScriptedModel(_script())
    agent = Agent(name="a", instructions="Be brief.", model=model, tools=[lookup])
    for r in range(ROUNDS):
        await Runner.run(agent, f"ask {r}", session=session, run_config=run_config)
    return model


def sent_calls(items: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """(call_id, arguments, output) of each function_call, its output found by call_id."""
    out = []
    for item in items:
        if item.get("type") == "function_call":
            answers = [o["output"] for o in items
                       if o.get("type") == "function_call_output" and o["call_id"] == item["call_id"]]
            out.append((item["call_id"], item["arguments"], answers[0] if len(answers) == 1 else f"{len(answers)}"))
    return out


def _inputs(model: ScriptedModel) -> list[list[dict[str, Any]]]:
    return [[dict(i) for i in call.input] for call in model.calls]


def test_the_runner_sends_every_stored_round(cold_memory: Memory) -> None:
    session = TiermemSession(cold_memory, "c")
    inputs = _inputs(asyncio.run(_run(session, RunConfig(tracing_disabled=True))))
    # each run's first model call sends the session's items and the new user turn:
    # every stored round with its own output, the repeats renamed in request order
    first_of_run = inputs[::2]
    assert sent_calls(first_of_run[1]) == [("call_0", '{"n":0}', "value 0")]
    assert sent_calls(first_of_run[2]) == [("call_0", '{"n":0}', "value 0"), ("call_0_2", '{"n":1}', "value 1")]
    for items in first_of_run:
        assert responses_problems(items) == []
    # the log keeps the ids appended; the items read back rename them
    stored = [m.body["call_id"] for m in cold_memory.history("c") if "call_id" in m.body]
    assert stored == ["call_0"] * 2 * ROUNDS
    got = asyncio.run(session.get_items())
    assert [i["call_id"] for i in got if "call_id" in i] == ["call_0", "call_0", "call_0_2", "call_0_2",
                                                          "call_0_3", "call_0_3"]


def test_an_items_id_is_the_same_in_every_read(cold_memory: Memory) -> None:
    """An id depends only on the items before it: every `limit` reads the tail of the
    whole view, and appending leaves the ids before it; a pop returns the row as stored."""
    session = TiermemSession(cold_memory, "c")
    asyncio.run(_run(session, RunConfig(tracing_disabled=True)))
    whole = asyncio.run(session.get_items())
    for limit in range(1, len(whole) + 1):
        assert asyncio.run(session.get_items(limit)) == whole[-limit:]
    asyncio.run(session.add_items([{"role": "user", "content": "again"},
                                   {"type": "function_call", "call_id": "call_0", "name": "lookup",
                                    "arguments": '{"n":9}'}]))
    after = asyncio.run(session.get_items())
    assert after[:len(whole)] == whole
    assert after[-1]["call_id"] == "call_0_4"
    assert asyncio.run(session.pop_item()) == {"type": "function_call", "call_id": "call_0", "name": "lookup",
                                               "arguments": '{"n":9}'}


def test_the_input_filter_sends_every_round_in_a_run(cold_memory: Memory) -> None:
    """With `model_input_filter` every model call, a run's later ones included (the
    model's `call_0` meeting the history's), gets the context read from the log and
    renamed whole (passes before too: the filter's context is the Responses form's)."""
    session = TiermemSession(cold_memory, "c")
    config = RunConfig(tracing_disabled=True, call_model_input_filter=session.model_input_filter(BUDGET))
    inputs = _inputs(asyncio.run(_run(session, config)))
    assert sent_calls(inputs[-1]) == [("call_0", '{"n":0}', "value 0"), ("call_0_2", '{"n":1}', "value 1"),
                                      ("call_0_3", '{"n":2}', "value 2")]
    for items in inputs:
        assert responses_problems(items, pending_ok=True) == []
