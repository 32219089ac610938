"""Retention refuses what would erase live data by accident: a negative age or a cutoff
in the future (whichever way it is given), and a namespace erasure without a namespace.
Each case erased live conversations on the code before (an audit, 2026-12-03), except
the huge age, which raised OverflowError; an erasure that matches nothing reports that
it reclaimed nothing (it reported the whole file)."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path
from typing import Any

import pytest

from tiermem import Config, Memory, ValidationError
from tiermem.tiers.embed_onnx import FastEmbedder


@pytest.fixture
def mem(tmp_path: Path, embedder: FastEmbedder) -> Any:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False,
                background_indexing=False) as m:
        m.append("trip", {"role": "user", "content": "Book the 9:40 to Lisbon."})
        m.append("other", {"role": "user", "content": "hello"}, namespace="default/alice")
        yield m


@pytest.mark.parametrize("older_than", [
    dt.timedelta(days=-1),  # a negative age: every conversation is "older" than it
    dt.timedelta(seconds=-0.5),  # however small
    dt.datetime.now(dt.UTC) + dt.timedelta(hours=1),  # a cutoff in the future
    -86_400,  # a negative age in seconds (refused before too)
    math.nan,  # not an age
    10**400,  # an age a float cannot hold (OverflowError before)
], ids=["timedelta -1 day", "timedelta -0.5 s", "future datetime", "seconds -86400", "nan", "10**400"])
def test_prune_refuses_an_age_that_would_take_live_conversations(mem: Memory, older_than: Any) -> None:
    with pytest.raises(ValidationError, match="older_than"):
        mem.prune(older_than)
    assert mem.history("trip")  # still there
    assert mem.tombstones() == []


def test_prune_with_a_real_age_still_prunes_what_is_old(mem: Memory) -> None:
    assert mem.prune(dt.timedelta(0)).conversation_ids == ["trip"]  # age 0: everything up to now


def test_delete_namespace_needs_a_namespace(mem: Memory) -> None:
    with pytest.raises(ValidationError, match="namespace"):
        mem.delete_namespace(None)  # type: ignore[arg-type]
    assert mem.history("trip") and mem.history("other", namespace="default/alice")


def test_an_erasure_that_matches_nothing_reclaims_nothing(mem: Memory) -> None:
    report = mem.delete_namespace("nobody-here")
    assert report.conversations == 0
    assert report.bytes_reclaimed == 0
    assert report.bytes_after == report.bytes_before > 0
