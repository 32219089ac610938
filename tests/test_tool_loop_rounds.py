"""An agent's current tool loop is kept whatever the settings (planner.pack
`Packing.take_loop`): the turns after the latest user message, a pending round included,
go into the context newest first up to the room left, past the tail's share, until one
does not fit whole; the budget stays hard.

On the code before, outside the defaults the tail was capped at its share (a tenth of
the budget) and stopped at the first unit that did not fit: a tool round larger than the
share left the tail empty, so the model never saw the results it waited for and called
the tool again (a loop), and more budget could send fewer rounds (the tail's grid).
Under the defaults a new epoch filled the tail to 54% of the budget only, and the tail
read fewer rows than fit (a trimmed tool output counted at its trim allowance plus 64).
Real SQLite files, the real embedder and tokenizer."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.tokens import messages_tokens

pytestmark = pytest.mark.usefixtures("shared_vectors")

SYSTEM = "Be brief."
ASK = "Research the Lisbon trip thoroughly."
ROUNDS = 12
# rounds of about 140 tokens (untrimmed: under tool_trim_tokens), over the tail's share
# of every budget below 1,400
RESULT_WORDS = "hotel flight seat " * 40
BUDGETS = [150, 700, 1200, 2000, 3000, 9000]

SETTINGS = [
    # the memory blocks in one system message before the latest user message: the tail
    # kept from call to call (kept_tail), re-anchored at its share, never filled
    pytest.param({"system_messages": "before_latest"}, id="system_messages=before_latest"),
    # DESIGN's literal order, retrieved turns before the tail: no epochs, never filled
    pytest.param({"retrieved_placement": "before_tail"}, id="retrieved_placement=before_tail"),
    # every call rebuilt: no epochs, never filled
    pytest.param({"context_epochs": False}, id="context_epochs=false"),
    # the shipped defaults: epochs; a new epoch filled to 54% of the budget only
    pytest.param({}, id="defaults"),
]


def _mem(tmp_path: Path, embedder: FastEmbedder, name: str, settings: dict[str, Any]) -> Memory:
    return Memory(Config(data_dir=tmp_path / name, **settings), embedder=embedder, hot=False,
                  background_indexing=False)


def _call(k: int) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"call_{k}", "type": "function", "function": {"name": "search", "arguments": f'{{"q": "lisbon {k}"}}'}}]}


def _result(k: int) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": f"call_{k}", "content": RESULT_WORDS + f"RESULT-{k}"}


def _fitting(memory: Memory, rounds: list[list[dict[str, Any]]], budget: int) -> int:
    """How many of the newest rounds fit the budget whole beside the system prompt and
    the user message (counted exactly, as the context is)."""
    fixed = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": ASK}]
    n = 0
    while n < len(rounds) and messages_tokens(
            memory.tokens, fixed + [m for r in rounds[len(rounds) - n - 1:] for m in r]) <= budget:
        n += 1
    return n


def _sent(messages: list[dict[str, Any]]) -> list[int]:
    """The rounds whose call the context shows (a pending one has no result yet)."""
    return [int(c["id"].split("_")[1]) for m in messages if m.get("role") == "assistant"
            for c in m.get("tool_calls") or []]


def _check(memory: Memory, rounds: list[list[dict[str, Any]]], budget: int) -> list[int]:
    ctx = memory.context("c", ASK, budget, system=SYSTEM)
    assert ctx.tokens <= budget and ctx.tokens == messages_tokens(memory.tokens, ctx.messages)
    sent = _sent(ctx.messages)
    # every round that fits is sent, the newest first: never a gap; the latest round
    # always, its output trimmed to fit where it does not fit whole (planner.pack fit_round)
    want = list(range(len(rounds) - max(_fitting(memory, rounds, budget), min(1, len(rounds))), len(rounds)))
    assert sent == want, (budget, sent, want)
    results = [m["tool_call_id"] for m in ctx.messages if m.get("role") == "tool"]
    assert results == [f"call_{k}" for k in sent if len(rounds[k]) == 2]  # each with its result
    return sent


@pytest.mark.parametrize("settings", SETTINGS)
def test_every_round_of_the_loop_that_fits_is_sent(tmp_path: Path, embedder: FastEmbedder,
                                                   settings: dict[str, Any]) -> None:
    """An agent loop: context() before each model call, one memory per budget (an epoch
    or a kept tail goes on from call to call)."""
    counts: dict[int, list[int]] = {}
    for budget in BUDGETS:
        with _mem(tmp_path, embedder, f"b{budget}", settings) as memory:
            memory.append("c", {"role": "user", "content": ASK})
            rounds: list[list[dict[str, Any]]] = []
            counts[budget] = []
            for k in range(ROUNDS + 1):
                counts[budget].append(len(_check(memory, rounds, budget)))
                if k < ROUNDS:
                    rounds.append([_call(k), _result(k)])
                    memory.append_many("c", rounds[-1])
    assert counts[BUDGETS[-1]][-1] == ROUNDS  # the largest budget shows the whole loop
    for lo, hi in itertools.pairwise(BUDGETS):
        # more budget never sends fewer rounds, at any step of the loop
        assert all(a <= b for a, b in zip(counts[lo], counts[hi], strict=True)), (lo, hi, counts)


@pytest.mark.parametrize("settings", SETTINGS)
def test_a_finished_loop_read_once_at_each_budget(tmp_path: Path, embedder: FastEmbedder,
                                                  settings: dict[str, Any]) -> None:
    """The whole loop in the log, one context per budget, the budgets on one memory (each
    a new epoch key): the rounds that fit, and never fewer at a larger budget."""
    with _mem(tmp_path, embedder, "m", settings) as memory:
        memory.append("c", {"role": "user", "content": ASK})
        rounds = [[_call(k), _result(k)] for k in range(ROUNDS)]
        memory.append_many("c", [m for r in rounds for m in r])
        counts = [len(_check(memory, rounds, budget)) for budget in BUDGETS]
    assert counts == sorted(counts) and counts[-1] == ROUNDS, counts


@pytest.mark.parametrize("settings", SETTINGS)
def test_the_pending_round_is_sent_with_the_rounds_before_it(tmp_path: Path, embedder: FastEmbedder,
                                                             settings: dict[str, Any]) -> None:
    """context() between the model's call and its result: the call waiting for its
    result closes the context, the earlier rounds before it as far as they fit."""
    with _mem(tmp_path, embedder, "m", settings) as memory:
        memory.append("c", {"role": "user", "content": ASK})
        rounds: list[list[dict[str, Any]]] = [[_call(k), _result(k)] for k in range(3)] + [[_call(3)]]
        memory.append_many("c", [m for r in rounds for m in r])
        for budget in (700, 1200):
            sent = _check(memory, rounds, budget)
            assert sent[-1] == 3 and len(sent) >= 3, (budget, sent)
