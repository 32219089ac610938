"""`model_input_filter` in streamed runs: the whole input within the budget, and a new
question told by position, not by content.

A streamed run (`Runner.run_streamed`) saves its new input only after the first model
call, so the filter sends the input's items the log does not hold yet after the planned
context. Two gaps: those items went beyond the budget (the context was planned under
the whole of it: a long history filled it and the question came on top, against
docs/design.md invariant 5); and under `session_settings` limit 0, or where the log ends
with the very text asked again, the new item was matched by content to the stored one
and dropped (the model never got the repeated question). Now the context is planned
under the budget less the new items' tokens (the memory's tokenizer), those items alone
past it raise `BudgetTooSmall` as a non-streamed run's oversized question does, and the
new items are the input's after the history the SDK read (`get_items`) and what was
saved since. Real SQLite, the real `openai-agents` Runner with its ScriptedModel; what
each model call received is read from the model and counted with the memory's tokenizer.
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
from agents_helpers import filter_config, open_memory, run_turn
from client_helpers import both, served

from tiermem.adapters._common import MemoryLike
from tiermem.adapters.openai_agents import TiermemSession
from tiermem.memory import Memory
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.errors import BudgetTooSmall
from tiermem.tiers.formats import message_text
from tiermem.tiers.tokens import messages_tokens

CONV = "c"
BUDGET_TOKENS = 400
HISTORY_TURNS = 30  # user/assistant pairs of ~18 tokens a message: ~1,000 tokens, past the budget
LONG_WORDS = 100  # a question of ~200 tokens: more than the room the planned context leaves spare (~180)
HUGE_WORDS = 300  # a question of ~600 tokens: past the whole budget alone
PREVIOUS_WORDS = 160  # a stored question of ~320 tokens: fits the budget alone, not beside the new one


def said(items: list[dict[str, Any]]) -> list[str]:
    return [f"{i['role']}: {message_text(i)}" for i in items if i.get("role") in ("user", "assistant")]


def words(n: int, word: str) -> str:
    return " ".join(f"{word}{k}" for k in range(n))


def history(mem: MemoryLike, turns: int, last_user_words: int = 0) -> None:
    """A stored conversation of `turns` exchanges, then, where `last_user_words`, a long
    user message of that many words with no reply (as a run that failed leaves the log)."""
    bodies: list[dict[str, Any]] = []
    for t in range(turns):
        bodies.append({"role": "user", "content": f"Turn {t}: tell me about the harbour trip and the ferry times."})
        bodies.append({"role": "assistant", "content": f"Reply {t}: the ferry leaves at nine and returns at six."})
    if last_user_words:
        bodies.append({"role": "user", "content": words(last_user_words, "earlier")})
    mem.append_many(CONV, bodies)


async def turn(session: TiermemSession, model: ScriptedModel, text: str, *, streamed: bool) -> None:
    agent = Agent(name="a", instructions="Be brief.", model=model)
    await run_turn(agent, text, session, filter_config(session, BUDGET_TOKENS), streamed=streamed)


# (stored exchanges, words of a trailing stored user message, words of the question,
# whether the model's input still holds history)
BUDGET_CASES = {
    # a long history fills the budget; the long question came on top of it (failed before)
    "long history, long question": (HISTORY_TURNS, 0, LONG_WORDS, True),
    # the log's latest user message (the previous question) and the new one do not both
    # fit: the question goes alone, as a non-streamed context drops a tail turn that does
    # not fit (failed before: the previous question planned whole, the new one on top)
    "no room for the previous question": (HISTORY_TURNS, PREVIOUS_WORDS, LONG_WORDS, False),
}


@pytest.mark.parametrize("case", BUDGET_CASES)
def test_a_streamed_input_stays_within_the_budget(tmp_path: Path, embedder: FastEmbedder, case: str) -> None:
    turns, last_words, question_words, with_history = BUDGET_CASES[case]
    question = words(question_words, "ask")
    with open_memory(tmp_path / "d", embedder) as mem:
        history(mem, turns, last_words)
        model = ScriptedModel([[assistant_message("Noted.")]])
        asyncio.run(turn(TiermemSession(mem, CONV), model, question, streamed=True))
        got = [dict(i) for i in model.calls[0].input]
        assert messages_tokens(mem.tokens, got) <= BUDGET_TOKENS
        assert said(got)[-1] == f"user: {question}"  # the question, whole, last
        assert (len(got) > 1) is with_history
        # the log's messages the context holds are sent as stored, before the question
        stored = said([m.body for m in mem.history(CONV)])
        assert all(s in stored for s in said(got)[:-1])


@pytest.fixture(scope="module")
def url_mem(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[tuple[str, Memory]]:
    with served(tmp_path_factory.mktemp("streamed-budget") / "data", embedder) as got:
        yield got


def test_over_a_client_and_a_namespaced_view_too(url_mem: tuple[str, Memory]) -> None:
    # a namespaced view counts with its Memory's tokenizer; a Client, which does not know
    # its server's, with the larger count of those a server may use (failed before: both over)
    url, mem = url_mem
    question = words(LONG_WORDS, "ask")
    with both(url, mem) as (local, remote):
        for memory in (local, remote):
            history(memory, HISTORY_TURNS)
            model = ScriptedModel([[assistant_message("Noted.")]])
            asyncio.run(turn(TiermemSession(memory, CONV), model, question, streamed=True))
            got = [dict(i) for i in model.calls[0].input]
            assert messages_tokens(mem.tokens, got) <= BUDGET_TOKENS
            assert said(got)[-1] == f"user: {question}" and len(got) > 1


@pytest.mark.parametrize("streamed", [False, True])
def test_a_question_past_the_budget_alone_is_refused_either_way(tmp_path: Path, embedder: FastEmbedder,
                                                                 streamed: bool) -> None:
    # the non-streamed filter refuses it (the plan's latest user message does not fit and
    # the filter does not truncate); the streamed one sent it over the budget (failed before)
    question = words(HUGE_WORDS, "ask")
    with open_memory(tmp_path / "d", embedder) as mem:
        history(mem, 2)
        model = ScriptedModel([[assistant_message("Noted.")]])
        with pytest.raises(BudgetTooSmall) as err:
            asyncio.run(turn(TiermemSession(mem, CONV), model, question, streamed=streamed))
        q = {"role": "user", "content": question}
        assert err.value.part == BudgetTooSmall.PART_LATEST
        assert err.value.needed == messages_tokens(mem.tokens, [q])  # the same count either way
        assert err.value.budget == BUDGET_TOKENS
        assert not model.calls  # the model got nothing


# (session_settings limit; whether the log ends with the question asked again, unanswered;
# what the streamed turn's model call gets)
REPEAT_CASES = {
    # the SDK reads no history; the new "Yes." equals the stored one (failed before: dropped)
    "limit 0": (0, False, ["user: Yes.", "assistant: Sure?", "user: Yes."]),
    # the SDK reads the latest item only, which is new question's equal (failed before)
    "limit 1, the log ends with it": (1, True, ["user: Yes.", "assistant: Sure?", "user: Yes.", "user: Yes."]),
    # the whole history read, ending with it (failed before: the new one taken for it)
    "no limit, the log ends with it": (None, True, ["user: Yes.", "assistant: Sure?", "user: Yes.", "user: Yes."]),
    # the whole history read, ending with the reply (passed before too)
    "no limit": (None, False, ["user: Yes.", "assistant: Sure?", "user: Yes."]),
}


@pytest.mark.parametrize("case", REPEAT_CASES)
def test_a_repeated_question_is_sent(tmp_path: Path, embedder: FastEmbedder, case: str) -> None:
    limit, unanswered, expected = REPEAT_CASES[case]
    with open_memory(tmp_path / "d", embedder) as mem:
        session = TiermemSession(mem, CONV, session_settings={"limit": limit})
        model = ScriptedModel([[assistant_message("Sure?")], [assistant_message("Done.")]])
        asyncio.run(turn(session, model, "Yes.", streamed=False))
        if unanswered:
            mem.append(CONV, {"role": "user", "content": "Yes."})
        asyncio.run(turn(session, model, "Yes.", streamed=True))
        assert said([dict(i) for i in model.calls[1].input]) == expected
        # saved once each, after the call
        assert said([m.body for m in mem.history(CONV)]) == [*expected, "assistant: Done."]
