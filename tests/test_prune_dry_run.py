"""`prune(dry_run=True)` / `tiermem prune --dry-run`: the report of what a prune would
erase now, on both engines, erasing and writing nothing: every conversation still there,
no tombstone, no byte reclaimed, no erasure hook told. What it lists is exactly what the
real prune then erases (review r_ops, 2026-12-07: `prune --older-than 0` erased a
conversation appended 2 s before, with no way to see that first)."""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import tm

from tiermem import Config, Memory, ValidationError
from tiermem.tiers.embed_onnx import FastEmbedder

DAY = 86_400.0
OLD = time.time() - 30 * DAY


@pytest.fixture
def mem(engine_config: Config, embedder: FastEmbedder) -> Iterator[Memory]:
    with Memory(engine_config, embedder=embedder, hot=False, background_indexing=False) as m:
        m.append_many("old", [{"role": "user", "content": f"old {i}", "created_at": OLD + i} for i in range(3)])
        m.append("fresh", {"role": "user", "content": "written just now"})
        m.append("elsewhere", {"role": "user", "content": "b", "created_at": OLD}, namespace="other")
        yield m


# (age, namespace arguments, the conversations listed and then erased, their messages)
@pytest.mark.parametrize(("older_than", "scope", "listed", "messages"), [
    # a week, the default namespace: the old conversation only
    (dt.timedelta(days=7), {}, ["old"], 3),
    # age 0: everything of the namespace, the one appended a moment ago too
    (dt.timedelta(0), {}, ["fresh", "old"], 4),
    # a week, every namespace: another namespace's old conversation too
    (dt.timedelta(days=7), {"all_namespaces": True}, ["old", "elsewhere"], 4),
    # older than anything: nothing
    (dt.timedelta(days=365), {}, [], 0),
], ids=["a-week", "age-0", "all-namespaces", "nothing"])
def test_a_dry_run_lists_what_the_prune_then_erases_and_erases_nothing(
        mem: Memory, older_than: dt.timedelta, scope: dict[str, bool], listed: list[str], messages: int) -> None:
    told: list[object] = []
    mem.erasure_hooks.append(told.append)
    time.sleep(0.01)  # age 0 is after the last append on any clock resolution
    preview = mem.prune(older_than, dry_run=True, **scope)
    assert (preview.conversations, preview.messages, preview.conversation_ids) == (len(listed), messages, listed)
    assert preview.bytes_reclaimed == 0 and preview.tombstones == [] and preview.internal_keys == []
    assert told == []  # nothing erased, so no hook is told
    assert mem.tombstones() == [] and mem.tombstones(namespace="other") == []
    assert sorted(mem.conversations()) == ["fresh", "old"] and mem.conversations(namespace="other") == ["elsewhere"]
    # the real prune erases exactly what was listed, and names the same incarnations
    report = mem.prune(older_than, **scope)
    assert report.conversation_ids == listed and report.messages == messages
    assert report.keys == preview.keys


def test_a_dry_run_is_validated_as_the_prune(mem: Memory) -> None:
    with pytest.raises(ValidationError, match="older_than"):
        mem.prune(dt.timedelta(days=-1), dry_run=True)
    with pytest.raises(ValidationError, match="dry_run"):
        mem.prune(dt.timedelta(days=1), dry_run="no")  # type: ignore[arg-type]  # truthy: not a boolean


def test_cli_dry_run_lists_and_keeps(tmp_path: Path, embedder: FastEmbedder) -> None:
    assert tm(tmp_path, embedder, "", "append", "fresh", "--role", "user", "--content", "hello").exit_code == 0
    time.sleep(0.01)
    out = tm(tmp_path, embedder, "", "prune", "--older-than", "0", "--dry-run", "--json")
    assert out.exit_code == 0, out.output
    answer = json.loads(out.output)
    assert (answer["dry_run"], answer["conversations"], answer["conversation_ids"]) == (True, 1, ["fresh"])
    text = tm(tmp_path, embedder, "", "prune", "--older-than", "0", "--dry-run")
    assert text.output.splitlines() == ["would prune 1 conversation(s), 1 message(s); nothing erased (--dry-run)",
                                        "  default/fresh"]  # namespace/id
    assert tm(tmp_path, embedder, "", "conversations").output.split() == ["fresh"]
