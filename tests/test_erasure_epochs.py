"""Namespace recall shows another conversation's turns; erasing or pruning that
conversation must take its text out of every later context, including contexts that
extend an epoch which showed it (planner.epoch keeps the previous context per
conversation), whichever process erased it. And a retrieved turn of another conversation
is headed by its id, never its internal key (`id~hex` would tell that the id is, or was,
used in another namespace). Both failed on the code before (an audit, 2026-12-03): the
erased text stayed in the sibling's contexts for as long as its epoch lasted, even after
the id was created again, and the heading printed the key."""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder

NS = "acme/alice"
SECRET = "kumquat7731"
QUESTION = "What was the vault code I told you in the other session?"


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def mem(data: Path, embedder: FastEmbedder) -> Iterator[Memory]:
    with Memory(Config(data_dir=data), embedder=embedder, hot=False, background_indexing=False) as m:
        yield m


def _shown(mem: Memory, query: str) -> str:
    mem.append("A", {"role": "user", "content": query}, namespace=NS)
    ctx = mem.context("A", query, 1500, namespace=NS)
    return json.dumps(ctx.messages)


def _seed(mem: Memory) -> None:
    for i in range(6):
        mem.append("A", {"role": "user", "content": f"line {i} about the garden and tomatoes"}, namespace=NS)
        mem.append("A", {"role": "assistant", "content": f"ok {i}"}, namespace=NS)
    # B is ten days old, so a prune of what is older than a week takes B and not A
    old = time.time() - 10 * 86_400
    mem.append("B", {"role": "user", "content": f"Remember: the vault code is {SECRET}.", "created_at": old},
               namespace=NS)
    mem.append("B", {"role": "assistant", "content": "Noted.", "created_at": old + 5}, namespace=NS)
    mem.catch_up(namespace=NS)
    assert SECRET in _shown(mem, QUESTION)  # namespace recall brought B's turn into A's context


ERASURES: list[tuple[str, Callable[[Memory], object]]] = [
    # the erasure a user asks for
    ("delete_conversation", lambda m: m.delete_conversation("B", namespace=NS)),
    # retention: what is older than a week
    ("prune", lambda m: m.prune(dt.timedelta(days=7), namespace=NS)),
]


@pytest.mark.parametrize("erase", [e[1] for e in ERASURES], ids=[e[0] for e in ERASURES])
def test_an_erased_conversation_leaves_the_contexts_that_showed_it(mem: Memory,
                                                                   erase: Callable[[Memory], object]) -> None:
    _seed(mem)
    erase(mem)
    assert mem.conversations(namespace=NS) == ["A"]
    mem.append("A", {"role": "assistant", "content": "ok"}, namespace=NS)
    assert SECRET not in _shown(mem, "tell me about tomatoes")
    # the id used again: the new B holds nothing of the old
    mem.append("B", {"role": "user", "content": "fresh B"}, namespace=NS)
    assert SECRET not in _shown(mem, "tell me more")


def test_an_erasure_by_another_process_ends_the_epoch_too(mem: Memory, data: Path,
                                                           embedder: FastEmbedder) -> None:
    _seed(mem)
    # another Memory on the same data dir (another worker, or `tiermem delete`): this one's
    # planner state is not told
    with Memory(Config(data_dir=data), embedder=embedder, hot=False, background_indexing=False) as other:
        assert other.delete_conversation("B", namespace=NS).messages == 2
    mem.append("A", {"role": "assistant", "content": "ok"}, namespace=NS)
    mem.append("A", {"role": "user", "content": "tell me about tomatoes"}, namespace=NS)
    ctx = mem.context("A", "tell me about tomatoes", 1500, namespace=NS)
    assert SECRET not in json.dumps(ctx.messages)
    assert ctx.plan.cache.new_epoch and "erased or pruned" in ctx.plan.cache.reason


def test_a_heading_names_the_other_conversation_by_its_id_not_its_key(mem: Memory) -> None:
    mem.append("alice@example.com", {"role": "user", "content": "hi"}, namespace="globex")  # takes the bare key
    mem.append("alice@example.com", {"role": "user", "content": "the code word for this one is zebra"},
               namespace="acme")
    mem.append("probe", {"role": "user", "content": "x"}, namespace="acme")
    mem.catch_up(namespace="acme")
    ctx = mem.context("probe", "What was the code word I told you before?", 800, namespace="acme")
    text = json.dumps(ctx.messages)
    assert "zebra" in text
    assert "(conversation alice@example.com, " in text
    assert "~" not in text
