"""A retraction names an earlier row. On the code before (an audit, 2026-12-03) a
retraction of a position not written yet, or of its own, was stored, and the message that
later took that position was silently missing from every context and active view."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tiermem import Config, Memory, ValidationError
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.formats import hidden_positions


@pytest.fixture
def mem(tmp_path: Path, embedder: FastEmbedder) -> Iterator[Memory]:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False,
                background_indexing=False) as m:
        m.append("c", {"role": "user", "content": "hello"})  # 0
        m.append("c", {"role": "assistant", "content": "hi"})  # 1
        yield m


@pytest.mark.parametrize("position", [
    2,  # its own position
    3,  # the next message's
    10**15,  # far ahead
], ids=["itself", "the next message", "far ahead"])
def test_a_retraction_of_a_row_not_written_yet_is_refused(mem: Memory, position: int) -> None:
    with pytest.raises(ValidationError, match="position"):
        mem.append("c", {"type": "tiermem.retract", "position": position})
    assert len(mem.history("c")) == 2
    mem.append("c", {"role": "user", "content": "My seat is 14C"})
    ctx = mem.context("c", "what is my seat?", 500)
    assert any("14C" in str(m.get("content")) for m in ctx.messages)


def test_a_retraction_in_a_batch_may_name_an_earlier_row_of_the_batch(mem: Memory) -> None:
    batch: list[dict[str, Any]] = [{"role": "user", "content": "My seat is 14C"},  # 2
                                   {"type": "tiermem.retract", "position": 2}]  # 3
    assert mem.append_many("c", batch) == [2, 3]
    with pytest.raises(ValidationError, match=r"messages\[1\]\.position"):
        mem.append_many("c", [{"role": "user", "content": "x"}, {"type": "tiermem.retract", "position": 6}])


def test_a_retraction_in_a_new_conversation_is_refused(mem: Memory) -> None:
    with pytest.raises(ValidationError, match="position"):
        mem.append("fresh", {"type": "tiermem.retract", "position": 0})
    assert "fresh" not in mem.conversations()


def test_a_stored_retraction_of_a_later_row_hides_nothing_but_itself() -> None:
    # rows stored before the check: a retraction hides only earlier rows
    rows = [(0, {"role": "user", "content": "a"}), (1, {"type": "tiermem.retract", "position": 1}),
            (2, {"type": "tiermem.retract", "position": 3}), (3, {"role": "user", "content": "b"}),
            (4, {"type": "tiermem.retract", "position": 0})]
    assert hidden_positions(rows)[0] == {0, 1, 2, 4}


def test_a_batch_must_be_a_list(mem: Memory) -> None:
    for bad in (None, "hello", {"role": "user", "content": "x"}):
        with pytest.raises(ValidationError, match="messages"):
            mem.append_many("c", bad)  # type: ignore[arg-type]
    # any iterable of messages will do
    assert mem.append_many("c", ({"role": "user", "content": f"m{i}"} for i in range(2))) == [2, 3]
