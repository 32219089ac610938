"""`Client.context` answers what `Memory.context` answers for the same conversation: the
same messages and token count, the plan as the library's own `Plan` (its `explain()`
and breakpoints), and with `format="anthropic"` the `system` and `messages` that
`to_anthropic` builds. Real HTTP to `tiermem serve`'s app on a real SQLite file.

Fails on the code before: there was no `tiermem.client`."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import pytest
from client_helpers import BUDGET, CONV, NS, QUERY, served
from service_helpers import TOKEN_ACME

from tiermem import Memory
from tiermem.adapters.anthropic import to_anthropic
from tiermem.client import AnthropicContext, Client
from tiermem.planner.plan import Context, Plan
from tiermem.service.schemas import finite
from tiermem.tiers.embed_onnx import FastEmbedder

# what two equal calls plan differently: how long each stage took, and the prompt-cache
# report, which compares each call with the conversation's call before it
PER_CALL = ("timings_ms", "cache")
TIGHT_BUDGET = 100  # tokens: the latest question and part of the rest, so the plan leaves turns out


@pytest.fixture(scope="module")
def url_mem(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[tuple[str, Memory]]:
    with served(tmp_path_factory.mktemp("client-context") / "data", embedder) as got:
        yield got


@pytest.fixture
def client(url_mem: tuple[str, Memory]) -> Iterator[Client]:
    with Client(url_mem[0], token=TOKEN_ACME, namespace=NS) as c:
        yield c


def _same_plan(a: Plan, b: Plan) -> dict[str, object]:
    return {f.name: getattr(a, f.name) for f in dataclasses.fields(Plan) if f.name not in PER_CALL
            and getattr(a, f.name) != getattr(b, f.name)}


# (the context's arguments) -- each answered by the service as by the library
CALLS = [
    {"query": QUERY, "budget": BUDGET},  # a question: retrieval under a tight budget
    {"query": None, "budget": BUDGET},  # no question: planned from the log alone
    {"query": QUERY, "budget": BUDGET, "system": "You are a travel agent."},  # the caller's system message
    {"query": QUERY, "budget": TIGHT_BUDGET},  # a budget that leaves turns out
]


@pytest.mark.parametrize("args", CALLS)
def test_the_clients_context_is_the_librarys(url_mem: tuple[str, Memory], client: Client,
                                             args: dict[str, Any]) -> None:
    mem = url_mem[1]
    # a context depends on the calls before it (the prompt-cache epoch keeps their layout):
    # the library's what-if plan (record=False) leaves that state as the client's call finds it
    want = mem.context(CONV, **args, namespace=NS, record=False)
    got = client.context(CONV, **args)
    assert isinstance(got, Context)
    assert got.messages == json.loads(json.dumps(finite(want.messages)))
    assert got.tokens == want.tokens <= args["budget"]
    assert _same_plan(got.plan, want.plan) == {}
    assert got.breakpoints == want.breakpoints
    # the plan is data, and reads as the library's does
    assert got.plan.explain().splitlines()[:4] == want.plan.explain().splitlines()[:4]
    assert got.with_cache_control() == json.loads(json.dumps(finite(want.with_cache_control())))


def test_a_plan_reads_back_as_the_library_wrote_it(url_mem: tuple[str, Memory]) -> None:
    plan = url_mem[1].context(CONV, QUERY, TIGHT_BUDGET, namespace=NS, record=False).plan
    assert plan.items and plan.left_out  # the budget left something out: both lists are read back
    wire = json.loads(json.dumps(finite(plan.to_dict())))
    assert Plan.from_dict(wire) == plan
    assert Plan.from_dict(wire).explain() == plan.explain()


def test_an_anthropic_context_is_the_librarys(url_mem: tuple[str, Memory], client: Client) -> None:
    mem = url_mem[1]
    ctx = mem.context(CONV, QUERY, BUDGET, namespace=NS, record=False)  # as above: the state left as found
    want = to_anthropic(ctx, mem.namespaced(NS), max_breakpoints=2)
    got = client.context(CONV, QUERY, BUDGET, format="anthropic", max_breakpoints=2)
    assert isinstance(got, AnthropicContext)
    assert (got.system, got.messages) == (want.system, want.messages)
    assert got.kwargs() == want.kwargs()  # ready for anthropic's messages.create(**ctx.kwargs())
    assert got.tokens <= BUDGET and got.plan.conversation_id == CONV
