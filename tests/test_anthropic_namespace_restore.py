"""`to_anthropic(ctx, mem)` restores what `from_anthropic` kept in metadata (thinking and
its signature, encrypted search results, citations) from the rows of the namespace the
context was planned in. A library caller planning `mem.context("session-1", ...,
namespace="acme")` and passing the root Memory, as the README shows, had the rows read
back in the root's "default" namespace: where another tenant also has a "session-1" with
the same words, that tenant's thinking block and signature (or search results,
citations) went into acme's request, and acme's own were lost. The context now records
its namespace (`Context.namespace`), the root Memory reads through it, and a view of
another namespace is refused naming `memory`.

Fails on the code before: the leak table's acme_root cases (the other tenant's data
sent, the own data missing; the default_root and acme_view cases, right before, guard
them), the refusals (nothing refused: the view's rows were read), and the recorded
namespace (Context had none)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tiermem import Memory
from tiermem.adapters.anthropic import from_anthropic, to_anthropic
from tiermem.errors import ValidationError

CONVERSATION = "session-1"  # the same id in both namespaces
TENANTS = ("default", "acme")
BUDGET = 2000
QUESTION = {"role": "user", "content": "What is my balance?"}
FOLLOW_UP = {"role": "user", "content": "And now?"}


def _reply(content: list[dict[str, Any]]) -> dict[str, Any]:
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "stop_reason": "end_turn", "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1},
            "content": content}


def _thinking(tenant: str) -> dict[str, Any]:
    return _reply([{"type": "thinking", "thinking": f"SECRET-{tenant}: account balance",
                    "signature": f"SIG-{tenant}"},
                   {"type": "text", "text": "Let me check that for you."}])


def _search(tenant: str) -> dict[str, Any]:
    return _reply([
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "balance"}},
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [
            {"type": "web_search_result", "url": "https://bank.test/", "title": "Bank",
             "encrypted_content": f"SECRET-{tenant}", "page_age": None}]},
        {"type": "text", "text": "Found it."}])


def _citation(tenant: str) -> dict[str, Any]:
    return _reply([{"type": "text", "text": "It is in the statement.", "citations": [
        {"type": "web_search_result_location", "url": "https://bank.test/", "title": "Bank",
         "encrypted_index": f"SECRET-{tenant}", "cited_text": "the statement"}]}])


# (case, the tenant's reply: the same words in both namespaces, its own data in metadata)
REPLIES = [
    # extended thinking and its signature (kept in metadata; the words are the text only)
    ("thinking", _thinking),
    # a web search's encrypted results (the words are the query, url and title)
    ("encrypted_search_results", _search),
    # a citation's encrypted index on a text block
    ("citations", _citation),
]


def _store(mem: Memory, case: Any) -> None:
    for ns in TENANTS:
        mem.append_many(CONVERSATION, from_anthropic(QUESTION), namespace=ns)
        mem.append_many(CONVERSATION, from_anthropic(case(ns)), namespace=ns)
        mem.append_many(CONVERSATION, from_anthropic(FOLLOW_UP), namespace=ns)
    bodies = [[r.body for r in mem.history(CONVERSATION, namespace=ns)] for ns in TENANTS]
    assert bodies[0] == bodies[1]  # the premise: the rows' words match, only their metadata differs


@pytest.mark.parametrize("case", [c for _n, c in REPLIES], ids=[n for n, _c in REPLIES])
@pytest.mark.parametrize("reader", [
    "acme_root",  # acme's context, the root Memory (the README's call): read in acme, not "default"
    "default_root",  # the root's own namespace, the root Memory: as before
    "acme_view",  # acme's context and acme's view (the service's call): as before
])
def test_each_tenant_gets_its_own_rows_back(cold_memory: Memory, case: Any, reader: str) -> None:
    _store(cold_memory, case)
    ns, via = reader.split("_")
    ctx = (cold_memory.namespaced(ns).context(CONVERSATION, "And now?", BUDGET) if via == "view"
           else cold_memory.context(CONVERSATION, "And now?", BUDGET, namespace=ns))
    other = next(t for t in TENANTS if t != ns)
    memory = cold_memory.namespaced(ns) if via == "view" else cold_memory
    sent = json.dumps(to_anthropic(ctx, memory, thinking="all").messages)
    assert f"SECRET-{other}" not in sent and f"SIG-{other}" not in sent
    assert f"SECRET-{ns}" in sent  # its own data restored, not lost


@pytest.mark.parametrize("planned, view", [
    ("acme", "default"),  # acme's context with the default tenant's view
    ("default", "acme"),  # the root's context with acme's view
    ("acme", "acme/alice"),  # a namespace below is another namespace
])
def test_a_view_of_another_namespace_is_refused(cold_memory: Memory, planned: str, view: str) -> None:
    _store(cold_memory, _thinking)
    ctx = cold_memory.context(CONVERSATION, "And now?", BUDGET, namespace=planned)
    with pytest.raises(ValidationError) as err:
        to_anthropic(ctx, cold_memory.namespaced(view), thinking="all")
    assert err.value.field == "memory"
    assert repr(planned) in str(err.value) and repr(view) in str(err.value)


def test_the_context_records_the_namespace_it_was_planned_in(cold_memory: Memory) -> None:
    cold_memory.append(CONVERSATION, QUESTION, namespace="acme/alice")
    by_view = cold_memory.namespaced("acme").namespaced("alice").context(CONVERSATION, None, BUDGET)
    by_root = cold_memory.context(CONVERSATION, None, BUDGET, namespace="acme/alice")
    assert by_view.namespace == by_root.namespace == "acme/alice"
    # the plan's JSON is unchanged: the namespace is the context's, not a stored plan field
    assert "namespace" not in by_root.plan.to_dict()
