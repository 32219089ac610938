"""Streamed turns extend one prompt-cache epoch, as non-streamed turns do.

A streamed run (`Runner.run_streamed`) saves its question only after the first model
call, so `model_input_filter` sends it after the planned context; 4e711e2 kept the whole
input within the budget by planning that call's context under the budget less the
question's tokens. The epoch is keyed by the budget (planner.epoch: "budget changed"
starts a new one), so every streamed turn, its question of another length, started a new
epoch: the provider's prompt cache never served a streamed run's history. Now the filter
gives the question's tokens as `pending_tokens` (`Memory.context`, a namespaced view, a
`Client`'s request): the context is planned under what they leave, the epoch keyed by
the budget given, so the next turn's context extends the previous one. Real SQLite, the
real `openai-agents` Runner with its ScriptedModel, the plans the store keeps
(`store_plans`), a served Client.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")
from agents import Agent
from agents.testing import ScriptedModel, assistant_message
from agents_helpers import filter_config, run_turn
from client_helpers import NS_VIA_CLIENT, NS_VIA_MEMORY, both, served

from tiermem.adapters._common import MemoryLike
from tiermem.adapters.openai_agents import TiermemSession
from tiermem.config import Config
from tiermem.memory import Memory
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.errors import BudgetTooSmall, ValidationError
from tiermem.tiers.tokens import REPLY_PRIMING_TOKENS, messages_tokens

CONV = "c"
BUDGET_TOKENS = 400
HISTORY_TURNS = 3  # a short history: the first context leaves room for the next turn's appends
QUESTIONS = ("What time is the ferry back?", "And the one in the morning, when does it leave exactly?")


def history(mem: MemoryLike, conv: str) -> None:
    for t in range(HISTORY_TURNS):
        mem.append_many(conv, [{"role": "user", "content": f"Turn {t}: tell me about the harbour trip."},
                               {"role": "assistant", "content": f"Reply {t}: the ferry leaves at nine."}])


async def turn(session: TiermemSession, model: ScriptedModel, text: str, *, streamed: bool) -> None:
    agent = Agent(name="a", instructions="Be brief.", model=model)
    await run_turn(agent, text, session, filter_config(session, BUDGET_TOKENS), streamed=streamed)


def two_turns(memory: MemoryLike, first_streamed: bool) -> list[list[dict[str, Any]]]:
    """The model's input at each of two turns, the second streamed."""
    model = ScriptedModel([[assistant_message("Nine.")], [assistant_message("Six.")]])
    session = TiermemSession(memory, CONV)
    asyncio.run(turn(session, model, QUESTIONS[0], streamed=first_streamed))
    asyncio.run(turn(session, model, QUESTIONS[1], streamed=True))
    return [[dict(i) for i in call.input] for call in model.calls]


def caches(mem: Memory, namespace: str) -> list[dict[str, Any]]:
    return [p["plan"]["cache"] for p in mem.cold.plans(mem.cold.key_of(namespace, CONV))]  # type: ignore[arg-type]


def check_extends(mem: Memory, namespace: str, inputs: list[list[dict[str, Any]]]) -> None:
    first, second = caches(mem, namespace)
    assert first["new_epoch"]  # the conversation's first context
    # failed before: "budget changed (390 -> 384 tokens)" (400 -> 384 after a non-streamed
    # turn), each first call planned under the budget less its question
    assert not second["new_epoch"], second["reason"]
    assert second["epoch"] == first["epoch"] and second["reason"].startswith("extends the previous context")
    # the second input extends the first (the first question now from the log, as sent)
    assert inputs[1][:len(inputs[0])] == inputs[0]
    assert inputs[1][-1] == {"role": "user", "content": QUESTIONS[1]}
    for got in inputs:
        assert messages_tokens(mem.tokens, got) <= BUDGET_TOKENS


# whether the first turn is streamed too (the second always is)
FIRST_TURNS = {
    # two streamed turns: the first planned under 400 less its question, the second under
    # 400 less another question's tokens (failed before: budget changed)
    "streamed, then streamed": True,
    # a non-streamed turn plans under the whole budget, its question in the log (failed before)
    "non-streamed, then streamed": False,
}


@pytest.mark.parametrize("case", FIRST_TURNS)
def test_consecutive_streamed_turns_extend_one_epoch(tmp_path: Path, embedder: FastEmbedder, case: str) -> None:
    config = Config(data_dir=tmp_path / "d", store_plans=True)
    with Memory(config, embedder=embedder, hot=False, background_indexing=False) as mem:
        history(mem, CONV)
        check_extends(mem, "default", two_turns(mem, FIRST_TURNS[case]))


@pytest.fixture(scope="module")
def url_mem(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[tuple[str, Memory]]:
    with served(tmp_path_factory.mktemp("streamed-epoch") / "data", embedder, store_plans=True) as got:
        yield got


def test_over_a_client_and_a_namespaced_view_too(url_mem: tuple[str, Memory]) -> None:
    # the view passes pending_tokens to its Memory, the Client in its request's body
    # (failed before: budget changed, both)
    url, mem = url_mem
    with both(url, mem) as (local, remote):
        for memory, namespace in ((local, NS_VIA_MEMORY), (remote, NS_VIA_CLIENT)):
            history(memory, CONV)
            check_extends(mem, namespace, two_turns(memory, True))


def test_pending_tokens_are_kept_free_of_the_context(tmp_path: Path, embedder: FastEmbedder) -> None:
    # planned under the budget less them; the epoch keyed by the budget given
    pending = BUDGET_TOKENS // 2
    config = Config(data_dir=tmp_path / "d", store_plans=True)
    with Memory(config, embedder=embedder, hot=False, background_indexing=False) as mem:
        history(mem, CONV)
        ctx = mem.context(CONV, None, BUDGET_TOKENS, pending_tokens=pending)
        assert ctx.plan.budget == BUDGET_TOKENS - pending and ctx.tokens <= BUDGET_TOKENS - pending
        again = mem.context(CONV, None, BUDGET_TOKENS)  # the same budget given, nothing pending
        assert not again.plan.cache.new_epoch, again.plan.cache.reason
        assert mem.context(CONV, None, BUDGET_TOKENS - 1).plan.cache.new_epoch  # another budget: a new one


REFUSED_CONV = "refused"
# pending_tokens refused: (value, the error, its part where BudgetTooSmall)
REFUSED = {
    # not a count of tokens
    "negative": (-1, ValidationError, None),
    # a bool is no integer here, as for budget
    "a bool": (True, ValidationError, None),
    # the whole budget: nothing left beside the reply priming (BudgetTooSmall naming
    # pending_tokens, not the log's latest user message: tests/test_pending_tokens_refusal.py)
    "the budget": (BUDGET_TOKENS, BudgetTooSmall, BudgetTooSmall.PART_PENDING),
    # one token short of fitting beside the priming
    "one past": (BUDGET_TOKENS - REPLY_PRIMING_TOKENS + 1, BudgetTooSmall, BudgetTooSmall.PART_PENDING),
}


@pytest.mark.parametrize("case", REFUSED)
def test_pending_tokens_past_the_budget_or_not_a_count_are_refused(url_mem: tuple[str, Memory], case: str) -> None:
    # the same refusal from a Memory, a namespaced view and a Client, before any plan
    value, error, part = REFUSED[case]
    url, mem = url_mem
    with both(url, mem) as (local, remote):
        for memory in (mem, local, remote):
            memory.append(REFUSED_CONV, {"role": "user", "content": "Hello."})
            with pytest.raises(error) as err:
                memory.context(REFUSED_CONV, None, BUDGET_TOKENS, pending_tokens=value)
            if part is None:
                assert err.value.field == "pending_tokens"  # type: ignore[attr-defined]
            else:
                assert err.value.part == part  # type: ignore[attr-defined]
                assert err.value.field == "pending_tokens"  # type: ignore[attr-defined]
                assert err.value.needed == REPLY_PRIMING_TOKENS + value  # type: ignore[attr-defined]
