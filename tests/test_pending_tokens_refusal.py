"""A context refused under `pending_tokens` names what was given: the budget, less the
pending tokens, leaves a room that cannot hold the fixed part ("budget 1000 less
pending_tokens 990 leaves 10 tokens, which cannot hold the latest user message ..."), and
where the pending tokens alone (with the reply priming) pass the budget the refusal names
`pending_tokens` (its field, the 422's loc), not the latest user message. Over the library,
HTTP (loc and message) and the Client (the same BudgetTooSmall, read back).

Before, the planner reported the room as if it were the budget ("10 tokens cannot hold
the latest user message ...; raise the budget" for a budget of 1000), and Memory called
the pending tokens the latest user message ("1000 tokens cannot hold the latest user
message (999 tokens ...)", loc ["body", "budget"]).

Real HTTP to the real app on a real SQLite file; the Memory is the server's own."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hash_embedder import HashEmbedder
from service_helpers import SCOPED_TOKENS, TOKEN_ACME, serve_in_thread

from tiermem import Config, Memory
from tiermem.client import Client
from tiermem.tiers.errors import BudgetTooSmall
from tiermem.tiers.tokens import REPLY_PRIMING_TOKENS

NS = "acme"
BUDGET = 1000  # tokens: the budget every case gives
QUESTION = "what is the secret?"  # the latest user message: 8 tokens with the reply priming
SYSTEM = "You are a helpful assistant with a long system prompt."  # 14 tokens as a message
COLD = "cold"  # never planned: refused before the turn table is read (Planner.refuse_unfit)
WARM = "warm"  # planned once: the turn cache holds it, refused by the plan's own check (_fixed)
PART_PENDING = "pending"  # BudgetTooSmall.PART_PENDING, spelled out so each case fails alone on the code before

# (pending_tokens, the call's other arguments, the part refused, the field it names)
CASES: list[tuple[int, dict[str, Any], str, str]] = [
    # the reviewer's: 10 tokens left cannot hold the 8-token question with the priming
    (990, {}, BudgetTooSmall.PART_LATEST, "budget"),
    # 3 tokens left: the reply priming fits, nothing else
    (997, {}, BudgetTooSmall.PART_LATEST, "budget"),
    # the system prompt alone passes the room left
    (990, {"system": SYSTEM}, BudgetTooSmall.PART_SYSTEM, "budget"),
    # not even a truncated question fits the 4 tokens left
    (996, {"truncate_latest": True}, BudgetTooSmall.PART_TRUNCATED, "budget"),
    # the pending tokens with the priming pass the budget on their own: their field
    (999, {}, PART_PENDING, "pending_tokens"),
    # ... as many as the budget
    (BUDGET, {}, PART_PENDING, "pending_tokens"),
]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Client, Memory, str]]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("pending-refusal") / "data", auth_tokens=SCOPED_TOKENS)
    with Memory(cfg, embedder=HashEmbedder(), hot=False, background_indexing=False) as mem, \
            serve_in_thread(cfg, mem) as url, Client(url, token=TOKEN_ACME, namespace=NS) as client:
        for conv in (COLD, WARM):
            for i in range(6):
                client.append(conv, {"role": "user" if i % 2 == 0 else "assistant",
                                     "content": f"the secret number {i} is {i * 7919}"})
            client.append(conv, {"role": "user", "content": QUESTION})
        mem.context(WARM, budget=BUDGET, namespace=NS)  # the turn cache holds it from now
        yield client, mem, url


def _check_wording(exc: BudgetTooSmall, pending: int, part: str, field: str) -> None:
    assert (exc.part, exc.field, exc.budget, exc.pending_tokens) == (part, field, BUDGET, pending)
    if part == PART_PENDING:
        assert exc.problem.startswith(
            f"{pending} pending tokens and the reply priming ({REPLY_PRIMING_TOKENS}) take "
            f"{pending + REPLY_PRIMING_TOKENS} tokens, past the budget ({BUDGET})"), exc.problem
        assert "latest user message" not in exc.problem  # not the log's message: the caller's count
    else:
        # the room named as the budget less the pending tokens, never as a budget of its own
        assert exc.problem.startswith(f"budget {BUDGET} less pending_tokens {pending} leaves {BUDGET - pending} "
                                      "tokens, which cannot hold "), exc.problem
        assert "lower pending_tokens" in exc.problem


@pytest.mark.parametrize("conv", [COLD, WARM])
@pytest.mark.parametrize(("pending", "kw", "part", "field"), CASES)
def test_memory_names_the_budget_given_and_the_pending_tokens(served: tuple[Client, Memory, str], conv: str,
                                                              pending: int, kw: dict[str, Any], part: str,
                                                              field: str) -> None:
    _, mem, _ = served
    with pytest.raises(BudgetTooSmall) as got:
        mem.context(conv, budget=BUDGET, pending_tokens=pending, namespace=NS, **kw)
    _check_wording(got.value, pending, part, field)


@pytest.mark.parametrize(("pending", "kw", "part", "field"), CASES)
def test_http_names_the_field_and_the_client_raises_what_memory_raises(
        served: tuple[Client, Memory, str], pending: int, kw: dict[str, Any], part: str, field: str) -> None:
    client, mem, url = served
    with pytest.raises(BudgetTooSmall) as local:
        mem.context(WARM, budget=BUDGET, pending_tokens=pending, namespace=NS, **kw)
    r = httpx.post(f"{url}/v1/conversations/{WARM}/context", json={"budget": BUDGET, "pending_tokens": pending, **kw},
                   headers={"Authorization": f"Bearer {TOKEN_ACME}"})
    assert r.status_code == 422, r.text
    (detail,) = r.json()["detail"]
    assert (detail["loc"], detail["msg"], detail["type"]) == (["body", field], local.value.problem, "budget_too_small")
    with pytest.raises(BudgetTooSmall) as remote:
        client.context(WARM, budget=BUDGET, pending_tokens=pending, **kw)
    got, want = remote.value, local.value
    _check_wording(got, pending, part, field)
    assert (got.part, got.needed, got.budget, got.pending_tokens, got.field, str(got)) == (
        want.part, want.needed, want.budget, want.pending_tokens, want.field, str(want))


@pytest.mark.parametrize("args", [
    dict(budget=1000, needed=11, priming=3, latest=8, pending=990),  # the latest message, the room named
    dict(budget=1000, needed=17, system=14, priming=3, pending=990),  # the system prompt past the room
    dict(budget=1000, needed=30, system=14, priming=3, latest=13, pending=980),  # the latest beside a system prompt
    dict(budget=1000, needed=12, truncated=True, priming=3, latest=9, pending=996),  # even truncated
    dict(budget=1000, needed=1002, priming=3, pending=999),  # the pending tokens alone
])
def test_each_pending_message_reads_back_as_the_error_it_is(args: dict[str, Any]) -> None:
    want = BudgetTooSmall(**args)
    got = BudgetTooSmall.from_problem(want.problem)
    assert got is not None
    assert (got.part, got.needed, got.budget, got.pending_tokens, got.field, str(got)) == (
        want.part, want.needed, want.budget, want.pending_tokens, want.field, str(want))
