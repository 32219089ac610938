"""A sibling's listing that races an erasure leaves no set under the erased conversation.

A context that shows another conversation's turns (namespace recall) lists its
conversation in the shown one's `{tag}:shownin` set before writing its state, and the
erasure of the shown one deletes that set with the rest of its tag (planner.epoch). A
sibling's call that planned before the erasure and writes after the erasure deleted the
tag's keys re-created the set: its state was deleted by its own check (the shown
conversation is no longer in the log), but the set stayed, naming the erased
conversation's key in Redis, and with `hot_idle_ttl_s = 0` it never expired. The writer
whose check finds a shown conversation erased now takes its listing out of that set too
(a set left empty is gone), and so does a writer whose own conversation was erased
before its write. A real SQLite file, the real embedded Redis, the real model.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import full_memory

from tiermem import Config, Memory
from tiermem.planner import epoch
from tiermem.tiers.embed import Embedder

NS = "acme/alice"
QUESTION = "What was the vault code I told you in the other thread?"
CANARY = "zq7canary-6021-loquat"


@pytest.fixture(params=[pytest.param(0.0, id="no-idle-ttl"), pytest.param(None, id="default-idle-ttl")])
def mem(request: pytest.FixtureRequest, tmp_path: Path, embedder: Embedder) -> Iterator[Memory]:
    extra = {} if request.param is None else {"hot_idle_ttl_s": request.param}
    with full_memory(Config(data_dir=tmp_path / "data", **extra), embedder) as m:
        yield m


def _show_secret_in_sibling(mem: Memory) -> tuple[str, str, epoch.RedisEpochs, epoch.EpochState]:
    """The sibling's context shows "secret" (namespace recall): its keys, the epoch store
    and the sibling's state, listed under "secret"."""
    mem.append("secret", {"role": "user", "content": f"Remember: the vault code is {CANARY}, keep it safe."},
               namespace=NS)
    mem.append("sibling", {"role": "user", "content": "I am planting tomatoes in the garden this week."},
               namespace=NS)
    mem.append("sibling", {"role": "user", "content": QUESTION}, namespace=NS)
    mem.catch_up(namespace=NS)
    assert CANARY in json.dumps(mem.context("sibling", QUESTION, 1500, namespace=NS).messages)  # the premise
    sibling, secret = mem.cold.key_of(NS, "sibling"), mem.cold.key_of(NS, "secret")
    store = mem.planner._epochs
    assert sibling is not None and secret is not None and isinstance(store, epoch.RedisEpochs)
    state = store.get(sibling)
    assert state is not None
    assert store.tier.client.sismember(store.tier.tag(secret) + epoch.SHOWN_IN_SUFFIX, sibling)  # the premise
    return sibling, secret, store, state


def test_a_listing_written_after_the_erasure_deleted_the_set_does_not_stay(mem: Memory) -> None:
    sibling, secret, store, state = _show_secret_in_sibling(mem)
    listing = store.tier.tag(secret) + epoch.SHOWN_IN_SUFFIX
    mem.delete_conversation("secret", namespace=NS)
    assert not store.tier.client.exists(listing)  # the erasure deleted it with the tag's keys
    # the sibling's call that planned before the erasure ends now: its listing comes after
    # the erasure's deletion (the race forced)
    store.put(sibling, state)
    assert not store.tier.client.exists(store.key(sibling))  # its state: deleted by its own check (before too)
    left = [k for k in store.tier.client.scan_iter(match=store.tier.tag(secret) + "*")]
    assert left == [] and store.errors == 0


def test_a_writer_erased_before_its_write_leaves_no_listing_under_the_shown_one(mem: Memory) -> None:
    """The sibling itself is erased while its call is under way: its state is refused (no
    hot set), and its listing under "secret" (alive) named its key for as long as
    "secret" lives."""
    sibling, secret, store, state = _show_secret_in_sibling(mem)
    mem.delete_conversation("sibling", namespace=NS)
    store.put(sibling, state)  # the sibling's call ends after its erasure (the race forced)
    assert not store.tier.client.exists(store.key(sibling))  # refused (before too)
    assert not store.tier.client.sismember(store.tier.tag(secret) + epoch.SHOWN_IN_SUFFIX, sibling)
    assert store.errors == 0
