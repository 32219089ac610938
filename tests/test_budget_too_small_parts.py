"""BudgetTooSmall names the fixed part that does not fit (tiers.errors, planner.build).

It counted the system prompt into "the latest user message": a 500-word system prompt
and a 2,011-token latest message at budget 100 answered "cannot hold the latest user
message (2515 tokens) ... pass truncate_latest=True", and with truncate_latest=True a
system prompt over the budget read "cannot hold even a truncated latest user message (at
least 412 tokens)" though the message truncates to a few tokens. Now the error carries
the system prompt's, the reply priming's and the latest message's tokens apart, says
which does not fit, and gives no truncate_latest advice when the system prompt alone
exceeds the budget. The same text reaches the HTTP 422 body."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tiermem import Config, Memory
from tiermem.errors import BudgetTooSmall
from tiermem.service import create_app
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.tokens import REPLY_PRIMING_TOKENS, message_tokens

LONG = "word " * 400  # the latest user message, far past the budgets below
BIG_SYSTEM = "word " * 500  # a system prompt past every budget below on its own
SMALL_SYSTEM = "You are a terse assistant."  # fits every budget below on its own
# BudgetTooSmall.part: PART_SYSTEM, PART_LATEST, PART_TRUNCATED
SYSTEM, LATEST, TRUNCATED = "system", "latest", "truncated_latest"

# (conversation, system prompt, budget, truncate_latest, the part named, advises truncate_latest)
CASES = [
    # the reviewer's call: the system prompt alone exceeds the budget, so it is named, not the message
    ("long", BIG_SYSTEM, 100, False, SYSTEM, False),
    # the same with truncate_latest=True: not "even a truncated latest message", the system prompt
    ("long", BIG_SYSTEM, 20, True, SYSTEM, False),
    # no system prompt: the whole latest message is the culprit and truncating would help
    ("long", "", 100, False, LATEST, True),
    # a small system prompt that fits: still the latest message, with the system prompt's share named
    ("long", SMALL_SYSTEM, 100, False, LATEST, True),
    # a small system prompt leaves less than the least truncated message: that is named, no advice
    ("long", SMALL_SYSTEM, 16, True, TRUNCATED, False),
    # no user message at all and a system prompt past the budget: the system prompt
    ("assistant_only", BIG_SYSTEM, 100, False, SYSTEM, False),
]
IDS = ["big_system", "big_system_truncate", "no_system", "small_system", "small_system_truncate", "no_user"]


def _seed(mem: Memory) -> None:
    mem.append("long", {"role": "user", "content": LONG})
    mem.append("assistant_only", {"role": "assistant", "content": "hello"})


def _expected(mem: Memory, conv: str, system: str) -> tuple[int, int | None]:
    """The system prompt's tokens as a message (0 without one) and the whole latest
    user message's (None without one)."""
    sys_tokens = message_tokens(mem.tokens, {"role": "system", "content": system}) if system else 0
    latest = message_tokens(mem.tokens, {"role": "user", "content": LONG}) if conv == "long" else None
    return sys_tokens, latest


def _check_message(problem: str, part: str, advises: bool, sys_tokens: int, latest: int | None,
                   budget: int) -> None:
    assert ("truncate_latest" in problem) == advises, problem
    if part == SYSTEM:
        assert f"cannot hold the system prompt ({sys_tokens} tokens, {sys_tokens + REPLY_PRIMING_TOKENS}" in problem
        assert "latest user message" not in problem, problem
    elif part == LATEST:
        assert f"cannot hold the latest user message ({latest} tokens" in problem, problem
        needed = sys_tokens + REPLY_PRIMING_TOKENS + (latest or 0)
        assert f"{needed} tokens in all" in problem, problem
    else:
        assert "cannot hold even a truncated latest user message" in problem, problem
        # what the least truncated message takes, beside the system prompt
        assert f"beside the system prompt ({sys_tokens} tokens)" in problem, problem
        assert sys_tokens + REPLY_PRIMING_TOKENS <= budget
    if sys_tokens and part != SYSTEM:
        assert f"system prompt ({sys_tokens} tokens)" in problem, problem


@pytest.mark.parametrize(("conv", "system", "budget", "truncate", "part", "advises"), CASES, ids=IDS)
def test_the_error_names_the_part_that_does_not_fit(tmp_path: Path, embedder: FastEmbedder, conv: str,
                                                    system: str, budget: int, truncate: bool, part: str,
                                                    advises: bool) -> None:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        _seed(mem)
        sys_tokens, latest = _expected(mem, conv, system)
        with pytest.raises(BudgetTooSmall) as refused:
            mem.context(conv, "x", budget, system=system or None, truncate_latest=truncate)
        err = refused.value
        assert (err.part, err.system_tokens, err.priming_tokens) == (part, sys_tokens, REPLY_PRIMING_TOKENS)
        if part == LATEST:
            assert err.latest_tokens == latest
        _check_message(err.problem, part, advises, sys_tokens, latest, budget)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory,
           embedder: FastEmbedder) -> Iterator[tuple[TestClient, Memory]]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("budget") / "data")
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        _seed(mem)
        app = create_app(cfg, mem, auth=False, start_scheduler=False)
        with TestClient(app, raise_server_exceptions=False, base_url="http://127.0.0.1") as client:
            yield client, mem


@pytest.mark.parametrize(("conv", "system", "budget", "truncate", "part", "advises"), CASES, ids=IDS)
def test_the_422_body_names_the_part_that_does_not_fit(served: tuple[TestClient, Memory], conv: str,
                                                       system: str, budget: int, truncate: bool, part: str,
                                                       advises: bool) -> None:
    client, mem = served
    body: dict[str, object] = {"query": "x", "budget": budget, "truncate_latest": truncate}
    if system:
        body["system"] = system
    r = client.post(f"/v1/conversations/{conv}/context", json=body)
    assert r.status_code == 422, r.text
    (item,) = r.json()["detail"]
    assert item["loc"] == ["body", "budget"], item
    sys_tokens, latest = _expected(mem, conv, system)
    _check_message(item["msg"], part, advises, sys_tokens, latest, budget)
