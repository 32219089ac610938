"""A user's view (`Memory.namespaced(ns)`) offers `append_outcome` with every keyword of
`Memory.append_outcome`: a conditional append (`expect_position`, `expect_incarnation`)
through the view is checked as it is through `Memory` (the view dropped them before:
TypeError)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tiermem.config import Config
from tiermem.errors import PositionMismatch
from tiermem.memory import Memory
from tiermem.tiers.embed_onnx import FastEmbedder


@pytest.fixture
def mem(tmp_path: Path, embedder: FastEmbedder) -> Iterator[Memory]:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False, background_indexing=False) as m:
        yield m


def test_a_users_view_appends_where_expected_and_refuses_elsewhere(mem: Memory) -> None:
    alice = mem.namespaced("acme/alice")
    first = alice.append_outcome("c", [{"role": "user", "content": "one"}], expect_position=0)
    nxt = alice.append_outcome("c", [{"role": "user", "content": "two"}], expect_position=1,
                               expect_incarnation=first.incarnation)
    assert nxt.positions == [1]
    with pytest.raises(PositionMismatch):
        alice.append_outcome("c", [{"role": "user", "content": "three"}], expect_position=5)
    assert [m.body["content"] for m in alice.history("c")] == ["one", "two"]
    # the same name in another namespace is another conversation: nothing there to extend
    with pytest.raises(PositionMismatch):
        mem.namespaced("acme/bob").append_outcome("c", [{"role": "user", "content": "x"}], expect_position=1)
