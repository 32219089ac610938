"""What a tenant's context shows never depends on another namespace (DESIGN invariants 9
and 10), not even the order of turns retrieved from its other conversations.

A conversation's internal key is its id, or `id~<hex>` when another namespace used the
id first (tiers.cold, incarnations). The planner ordered retrieved turns, and broke
equal scores, by that key, so a tenant could write one text into a guessed id and into
a control id and read from its own context's order whether someone else uses the guess.
Orderings now go by the id the owner knows (`Candidate.other`) and the tables' order.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tiermem import Config, Memory
from tiermem.tiers.embed import Embedder

GUESS = "user-jane.doe@example.com"
QUESTION = "What is my favourite colour?"


def context_seen(tmp_path: Path, embedder: Embedder, used_elsewhere: str | None) -> tuple[Any, ...]:
    with Memory(Config(data_dir=tmp_path), embedder=embedder, hot=False, background_indexing=False) as m:
        if used_elsewhere is not None:  # another tenant holds the id (or held it, then erased it)
            m.append(GUESS, {"role": "user", "content": "refund my order please"}, namespace="acme")
            if used_elsewhere == "erased":
                m.delete_conversation(GUESS, namespace="acme")
        # the prober: one text under the guessed id and under a control id beside it
        for cid in (GUESS, GUESS + "-zq7"):
            m.append(cid, {"role": "user", "content": "My favourite colour is teal."}, namespace="evil")
        m.append("ask", {"role": "user", "content": QUESTION}, namespace="evil")
        m.catch_up()
        assert (m.cold.key_of("evil", GUESS) == GUESS) is (used_elsewhere is None)  # the premise
        ctx = m.context("ask", QUESTION, 2000, namespace="evil")
        shown = tuple(str(msg["content"]) for msg in ctx.messages)
        items = tuple((i.slice, tuple(i.positions), i.reason) for i in ctx.plan.items)
        return shown, items


@pytest.mark.parametrize("used_elsewhere", [
    "used",    # another namespace writes to the guessed id
    "erased",  # another namespace wrote to it and erased the conversation since
])
def test_retrieved_turns_come_in_the_same_order_whatever_another_namespace_did(
        tmp_path: Path, embedder: Embedder, used_elsewhere: str) -> None:
    alone = context_seen(tmp_path / "a", embedder, None)
    other = context_seen(tmp_path / "b", embedder, used_elsewhere)
    text = "\n".join(alone[0])
    assert GUESS in text and GUESS + "-zq7" in text  # both probes were retrieved and named
    assert other == alone
