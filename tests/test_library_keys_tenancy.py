"""The library never returns a conversation's internal key (DESIGN invariants 9 and 10).

A key is the bare id the first time the id is used anywhere in the database, else the id
with `~` and a random suffix: tenant-b, reading `shared-id~5c95...` back from its own
append or erasure, learnt that another namespace uses (or used) `shared-id`. `Memory` and
`NamespacedMemory` answered the key as `AppendOutcome.incarnation` and in
`ErasureReport.keys` (erasure and prune). They now answer the opaque token the HTTP
service answers (`incarnation_token`), take it back as `expect_incarnation`, and every
other public return value was already free of keys: the script below calls each one.

Fails before the fix: both runs' outcomes and reports hold the key, `shared-id~<hex>`
in one store and `shared-id` in the other.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tiermem import Config, ErasureReport, Memory
from tiermem.errors import PositionMismatch, ValidationError
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.models import INCARNATION_PATTERN, KEY_SEPARATOR, incarnation_token

TENANT_A, TENANT_B = "tenant-a", "tenant-b"
SHARED = "shared-id"
FORKED = "forked"
TOKEN = re.compile(INCARNATION_PATTERN)
# what differs between two runs of the same calls whoever else writes: clocks (times of
# writing, of erasing, of a plan's stages, a view's age) and the store's file sizes
# (bytes: the operator's figures, which count every tenant's writes by design)
VOLATILE = {"created_at", "deleted_at", "timings_ms", "stage_ms", "seconds_behind", "bytes_before", "bytes_after"}
AGE_LINE = re.compile(r"\d+s behind")  # the view's age in a plan's explanation (a clock too)


def _plain(value: Any) -> Any:
    """`value` as JSON-able data, every field of every record kept (the tokens too)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return {k: _plain(v) for k, v in vars(value).items() if not k.startswith("_")}


def _comparable(value: Any) -> Any:
    """`value` without what a clock decides, each token as `<token>` (a token is keyed by
    the database's own id, so two stores' tokens of one id differ anyway)."""
    if isinstance(value, dict):
        return {k: _comparable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_comparable(v) for v in value]
    if isinstance(value, str):
        return AGE_LINE.sub("<age>", TOKEN.sub("<token>", value)) if not TOKEN.fullmatch(value) else "<token>"
    return value


def say(text: str, at: float) -> dict[str, Any]:
    return {"role": "user", "content": text, "created_at": at}


def _tenant_b_calls(mem: Memory, heard: list[ErasureReport]) -> dict[str, Any]:
    """Every public call of tenant-b's whose answer is data, through its view and through
    `Memory` with `namespace=`, each answer as plain data."""
    b = mem.namespaced(TENANT_B)
    out: dict[str, Any] = {}
    first = b.append_outcome(SHARED, [say("I fly to Rome on May 3", 1001.0), say("and back on May 9", 1002.0)])
    out["append_outcome"] = first
    out["append_outcome_conditional"] = b.append_outcome(SHARED, [say("actually on May 4", 1003.0)],
                                                         expect_position=2, expect_incarnation=first.incarnation)
    out["append"] = b.append(SHARED, say("window seat please", 1004.0))
    out["append_many"] = mem.append_many(SHARED, [say("and a vegetarian meal", 1005.0)], namespace=TENANT_B)
    out["checkpoint"] = b.checkpoint(SHARED, "a trip to Rome in May", 1)
    b.pin(SHARED, 0)
    out["fork"] = b.fork(SHARED, 1, new_id=FORKED)
    # a turn of the fork's own: namespace recall skips a fork family's shared prefix (00c9512),
    # so this is what the planner and a namespace search retrieve from the fork
    out["append_to_fork"] = b.append(FORKED, say("the Rome hotel is near the Pantheon", 1005.5))
    out["history"] = b.history(SHARED)
    out["history_page"] = b.history_page(SHARED, limit=2)
    out["active"] = b.active(SHARED)
    out["facts"] = [f.to_json() for f in b.facts(SHARED)]
    out["conversations"] = b.conversations()
    out["conversations_page"] = b.conversations_page(limit=1)
    out["search"] = b.search(SHARED, "Rome")
    out["search_namespace"] = b.search(None, "Rome")
    ctx = b.context(SHARED, "when do I fly to Rome", 500)
    out["context_messages"] = ctx.messages
    out["plan"] = ctx.plan.to_dict()
    out["explain"] = ctx.plan.explain()
    out["consolidate"] = int(b.consolidate(SHARED))
    out["stats"] = b.stats()
    out["delete_conversation"] = b.delete_conversation(FORKED)
    out["prune"] = mem.prune(dt.timedelta(0), namespace=TENANT_B)
    b.append(SHARED, say("a new trip", 1006.0))
    out["delete_namespace"] = mem.delete_namespace(TENANT_B)
    out["tombstones"] = b.tombstones()
    # what an erasure hook is told is the caller's report too, but for the store's keys in
    # `internal_keys` (hooks are the store owner's code, in process: no tenant registers
    # one; test_incarnation_legacy_keys checks them)
    out["erasure_hooks"] = [dataclasses.replace(r, internal_keys=[]) for r in heard]
    return {k: _plain(v) for k, v in out.items()}


@pytest.fixture
def runs(tmp_path: Path, embedder: FastEmbedder) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """tenant-b's answers in a store where tenant-a uses `shared-id` and `forked` (the id
    tenant-b's fork takes, which its namespace recall then retrieves from) first, and in
    one where tenant-a's conversations have other ids."""
    answers = []
    for other_ids in ((SHARED, FORKED), ("a-id", "a-id2")):
        heard: list[ErasureReport] = []
        with Memory(Config(data_dir=tmp_path / other_ids[0]), embedder=embedder, hot=False,
                    background_indexing=False) as mem:
            mem.erasure_hooks.append(heard.append)
            for other_id in other_ids:
                mem.namespaced(TENANT_A).append(other_id, say("my flight to Oslo", 1000.0))
            answers.append(_tenant_b_calls(mem, heard))
            if other_ids[0] == SHARED:  # the case the test is about: tenant-b's keys are suffixed ones
                assert mem.cold.key_of(TENANT_A, SHARED) == SHARED
    yield answers[0], answers[1]


def test_no_answer_holds_a_key_or_depends_on_another_namespace(runs: tuple[dict[str, Any], dict[str, Any]]) -> None:
    shared, alone = runs
    # the answers that name other conversations do name tenant-b's fork (a suffixed key here)
    assert any(it["conversation_id"] == FORKED for it in shared["plan"]["items"])
    assert any(hit["conversation_id"] == FORKED for hit in shared["search_namespace"])
    for name, answer in shared.items():
        text = json.dumps(answer)
        assert KEY_SEPARATOR not in text, f"{name} answers an internal key: {text[:300]}"
    assert _comparable(shared) == _comparable(alone)


def test_the_incarnation_is_a_token_an_erasure_names_too(tmp_path: Path, embedder: FastEmbedder) -> None:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.namespaced(TENANT_A).append(SHARED, say("a", 1000.0))
        b = mem.namespaced(TENANT_B)
        out = b.append_outcome(SHARED, [say("b", 1001.0)])
        key = mem.cold.key_of(TENANT_B, SHARED)
        assert key is not None and KEY_SEPARATOR in key  # the id was used before: a suffixed key
        assert out.incarnation is not None and TOKEN.fullmatch(out.incarnation)
        assert out.incarnation == incarnation_token(mem.cold.db_uuid, key)  # the service's, for one store
        # the token chains conditional appends; a string neither a token nor a key of the
        # conversation's name (one saved from a library before 0784bc0, taken for its token:
        # test_incarnation_legacy_keys) is refused, nothing written
        assert b.append_outcome(SHARED, [say("c", 1002.0)], expect_position=1,
                                expect_incarnation=out.incarnation).incarnation == out.incarnation
        with pytest.raises(ValidationError) as refused:
            b.append_outcome(SHARED, [say("d", 1003.0)], expect_position=2,
                             expect_incarnation=key.replace(SHARED, "other-id"))
        assert refused.value.field == "expect_incarnation"
        assert len(b.history(SHARED)) == 2
        # the erasure names the incarnation gone by the same token; written again, the old
        # token is refused as a gone incarnation
        assert b.delete_conversation(SHARED).keys == [out.incarnation]
        with pytest.raises(PositionMismatch) as gone:
            b.append_outcome(SHARED, [say("e", 1004.0)], expect_position=0, expect_incarnation=out.incarnation)
        assert gone.value.found is None
        again = b.append_outcome(SHARED, [say("f", 1005.0)], expect_position=0)
        assert again.incarnation is not None and again.incarnation != out.incarnation
