"""A context whose fixed part does not fit the budget raises `BudgetTooSmall` over a
`tiermem.client.Client` as over the Memory in process: the same class, `part`, `needed`,
`budget` and message.

It was a plain `ValidationError("budget", ...)` over the client: the service's 422 says
`type: budget_too_small` and the message only, and the client read it as it reads any
422 (an `except BudgetTooSmall` written against the library missed it, and `part`, which
tells whether `truncate_latest=True` can help, was gone). The client now reads it back
(`BudgetTooSmall.from_problem`, as `IdempotencyKeyReused` is read). The system prompt's
message now states the tokens needed in all too, so that it reads back whole.

Real HTTP to the real app on a real SQLite file; the in-process side is the server's own
Memory (the same store, the same namespace).

Fails on the code before: every served case raises a plain ValidationError (5 cases),
and the system prompt's message has no total to read back."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hash_embedder import HashEmbedder
from service_helpers import SCOPED_TOKENS, TOKEN_ACME, serve_in_thread

from tiermem import Config, Memory
from tiermem.client import Client
from tiermem.tiers.errors import BudgetTooSmall

NS = "acme"
LONG_ASK = "please tell me about the weather in Lisbon next week " * 5  # ~55 tokens
SYSTEM = "You are a careful travel agent who answers in full sentences. " * 4  # ~50 tokens
WITH_USER = "with-user"
NO_USER = "no-user"  # only an assistant turn: no latest user message

CASES: list[tuple[str, dict[str, Any], str]] = [
    # the whole latest message does not fit: truncate_latest=True would help
    (WITH_USER, {"budget": 20}, BudgetTooSmall.PART_LATEST),
    # not even a truncated one fits
    (WITH_USER, {"budget": 5, "truncate_latest": True}, BudgetTooSmall.PART_TRUNCATED),
    # the latest message does not fit beside a system prompt that does
    (WITH_USER, {"budget": 60, "system": "Be brief."}, BudgetTooSmall.PART_LATEST),
    # the system prompt alone passes the budget
    (WITH_USER, {"budget": 20, "system": SYSTEM}, BudgetTooSmall.PART_SYSTEM),
    # no user message and a budget below the reply priming
    (NO_USER, {"budget": 2}, BudgetTooSmall.PART_PRIMING),
]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Client, Memory]]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("client-budget") / "data", auth_tokens=SCOPED_TOKENS)
    with Memory(cfg, embedder=HashEmbedder(), hot=False, background_indexing=False) as mem, \
            serve_in_thread(cfg, mem) as url, Client(url, token=TOKEN_ACME, namespace=NS) as client:
        client.append(WITH_USER, {"role": "user", "content": LONG_ASK})
        client.append(NO_USER, {"role": "assistant", "content": "Hello! How can I help?"})
        yield client, mem


@pytest.mark.parametrize(("conv", "kw", "part"), CASES)
def test_the_client_raises_what_memory_raises(served: tuple[Client, Memory], conv: str, kw: dict[str, Any],
                                              part: str) -> None:
    client, mem = served
    with pytest.raises(BudgetTooSmall) as local:
        mem.context(conv, "weather", namespace=NS, **kw)
    with pytest.raises(BudgetTooSmall) as remote:
        client.context(conv, "weather", **kw)
    assert local.value.part == part
    got, want = remote.value, local.value
    assert (got.part, got.needed, got.budget, got.field, str(got)) == (want.part, want.needed, want.budget,
                                                                        want.field, str(want))
    assert (got.system_tokens, got.priming_tokens) == (want.system_tokens, want.priming_tokens)
    # the system prompt's message does not state the latest message's tokens
    assert got.latest_tokens == (None if part == BudgetTooSmall.PART_SYSTEM else want.latest_tokens)


@pytest.mark.parametrize("args", [
    dict(budget=20, needed=57, priming=3, latest=54),  # latest, no system prompt
    dict(budget=80, needed=90, system=33, priming=3, latest=54),  # latest beside a system prompt
    dict(budget=20, needed=25, truncated=True, latest=12),  # truncated, nothing beside it
    dict(budget=20, needed=80, system=30, priming=3, latest=47),  # the system prompt, a latest message too
    dict(budget=100, needed=200, system=50, priming=3),  # the system prompt, no latest message
    dict(budget=2, needed=3, priming=3),  # the priming alone
])
def test_each_message_reads_back_as_the_error_it_is(args: dict[str, Any]) -> None:
    want = BudgetTooSmall(**args)
    got = BudgetTooSmall.from_problem(want.problem)
    assert got is not None
    assert (got.part, got.needed, got.budget, str(got)) == (want.part, want.needed, want.budget, str(want))


@pytest.mark.parametrize("problem", [
    "must be at least 1",  # another budget problem
    "20 tokens cannot hold the latest user message; raise the budget",  # another wording (another version's)
])
def test_another_message_is_not_read_as_one(problem: str) -> None:
    assert BudgetTooSmall.from_problem(problem) is None  # the client raises it as ValidationError
