"""An incarnation saved from a library before 0784bc0 keeps working.

Before 0784bc0 `Memory.append_outcome(...).incarnation` was the store's key of the
conversation (`trip-1`, or `trip-1~<hex>` when the id was used before in the database),
and callers saved it to pass back as `expect_incarnation`. Since, the library answers an
opaque token and refused every other string, so an upgrade broke every saved value
(`ValidationError: expect_incarnation: must be an incarnation an append answered`).

Now a key of the conversation's own name is taken for its token: the caller's own live
key (what it was given: it learns nothing new) writes as the token does; another key of
the name (another namespace's, an incarnation erased since) is a gone incarnation,
`PositionMismatch` as for a stale token (what the old library answered for it); any other
string is still a `ValidationError`; a deprecation warning is logged once per process.
The HTTP service and MCP always answered tokens: they still refuse a key (422 / a tool
error), nothing written. Erasure hooks (the store owner's, in process) are told the keys
again, in `ErasureReport.internal_keys`, while every answer keeps them out.

Fails before the fix: the own-key cases (ValidationError), the stale-key cases
(ValidationError, not PositionMismatch), the warning, and `internal_keys` (no such field).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hash_embedder import HashEmbedder
from service_helpers import bearer, serve_in_thread

from tiermem import Config, ErasureReport, Memory
from tiermem import memory as memory_module
from tiermem.errors import PositionMismatch, ValidationError
from tiermem.tiers.models import KEY_SEPARATOR, incarnation_token

TENANT_A, TENANT_B = "tenant-a", "tenant-b"
SHARED = "trip-1"  # tenant-a uses it first: tenant-b's key of it is suffixed
TOKEN_A = "tok-legacy-tenant-a"  # tenant-a's bearer token on the service


def say(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=HashEmbedder(), hot=False,
                background_indexing=False) as m:
        m.namespaced(TENANT_A).append(SHARED, say("a: my flight to Oslo"))
        m.namespaced(TENANT_B).append(SHARED, say("b: my flight to Rome"))
        yield m


@pytest.fixture(autouse=True)
def warn_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test its own process as far as the once-per-process warning goes."""
    monkeypatch.setattr(memory_module, "_legacy_incarnation_warned", False)


def _rows(mem: Memory, ns: str) -> list[str]:
    return [m.body["content"] for m in mem.history(SHARED, namespace=ns)]


# (id, the namespace appending, whose key it passes): the caller's own live key, as the
# library answered it before 0784bc0, writes as its token does
OWN_KEYS: list[tuple[str, str]] = [
    ("bare key (first use of the id)", TENANT_A),
    ("suffixed key (the id was used before)", TENANT_B),
]


@pytest.mark.parametrize("ns", [c[1] for c in OWN_KEYS], ids=[c[0] for c in OWN_KEYS])
def test_the_callers_own_key_writes_as_its_token(mem: Memory, ns: str, caplog: pytest.LogCaptureFixture) -> None:
    key = mem.cold.key_of(ns, SHARED)
    assert key is not None and (KEY_SEPARATOR in key) == (ns == TENANT_B)
    view = mem.namespaced(ns)
    with caplog.at_level(logging.WARNING, logger="tiermem"):
        out = view.append_outcome(SHARED, [say("window seat")], expect_position=1, expect_incarnation=key)
        # the answer is the token, never the key given
        assert out.incarnation == incarnation_token(mem.cold.db_uuid, key)
        # and the batch forms take it too
        view.append_many(SHARED, [say("aisle, actually")], expect_position=2, expect_incarnation=key)
        view.append(SHARED, say("vegetarian meal"), expect_position=3, expect_incarnation=key)
        # a stale position with the key is refused as with the token: the position found
        with pytest.raises(PositionMismatch) as behind:
            view.append_outcome(SHARED, [say("late")], expect_position=1, expect_incarnation=key)
    assert behind.value.found == 4
    assert len(_rows(mem, ns)) == 4
    warned = [r for r in caplog.records if r.getMessage() == memory_module.LEGACY_INCARNATION_WARNING]
    assert len(warned) == 1  # once per process, however many appends pass a key


def test_another_namespaces_key_is_a_gone_incarnation(mem: Memory) -> None:
    # tenant-b passing tenant-a's key (the bare id): refused as the old library refused
    # it, nothing written; the answer is the same as for its own erased key below, so it
    # tells nothing of tenant-a
    with pytest.raises(PositionMismatch) as gone:
        mem.namespaced(TENANT_B).append_outcome(SHARED, [say("x")], expect_position=1, expect_incarnation=SHARED)
    assert gone.value.found is None
    assert _rows(mem, TENANT_B) == ["b: my flight to Rome"]


def test_a_key_of_an_erased_incarnation_is_gone(mem: Memory) -> None:
    a = mem.namespaced(TENANT_A)
    old = mem.cold.key_of(TENANT_A, SHARED)
    assert old == SHARED
    a.delete_conversation(SHARED)
    a.append(SHARED, say("a: a new trip"))
    assert mem.cold.key_of(TENANT_A, SHARED) != old
    with pytest.raises(PositionMismatch) as gone:
        a.append_outcome(SHARED, [say("x")], expect_position=1, expect_incarnation=old)
    assert gone.value.found is None
    assert _rows(mem, TENANT_A) == ["a: a new trip"]


# (id, expect_incarnation): no token and no key of the conversation's name: bad input
NOT_KEYS: list[tuple[str, str]] = [
    ("another conversation's name", "trip-2"),
    ("another conversation's suffixed key", "trip-2~0123456789abcdef"),
    ("a prefix of the name", "trip"),
    ("not an id at all", "trip-1 "),
    ("upper-case token", "A" * 32),
]


@pytest.mark.parametrize("given", [c[1] for c in NOT_KEYS], ids=[c[0] for c in NOT_KEYS])
def test_any_other_string_is_still_bad_input(mem: Memory, given: str) -> None:
    with pytest.raises(ValidationError) as refused:
        mem.namespaced(TENANT_B).append_outcome(SHARED, [say("x")], expect_position=1, expect_incarnation=given)
    assert refused.value.field == "expect_incarnation"
    assert _rows(mem, TENANT_B) == ["b: my flight to Rome"]


def test_the_service_and_mcp_still_refuse_a_key(tmp_path: Path, mem: Memory) -> None:
    """They always answered tokens: nobody saved a key from them, and a tenant there must
    not test guesses of its key (whether `trip-1` is its own tells whether another
    namespace had the id first)."""
    key = mem.cold.key_of(TENANT_A, SHARED)
    assert key == SHARED
    cfg = mem.config.model_copy(update={"auth_tokens": {TOKEN_A: TENANT_A}})
    with serve_in_thread(cfg, mem) as url:
        r = httpx.post(f"{url}/v1/conversations/{SHARED}/messages", headers=bearer(TOKEN_A, TENANT_A),
                       json={**say("x"), "expect_position": 1, "expect_incarnation": key})
        assert r.status_code == 422, r.text
        assert r.json()["detail"][0]["loc"][-1] == "expect_incarnation"
    pytest.importorskip("mcp")
    from mcp import Client as McpClient

    from tiermem.adapters.mcp_server import build_server

    async def call() -> Any:
        async with McpClient(build_server(mem.namespaced(TENANT_A))) as client:
            return await client.call_tool("append", {"conversation_id": SHARED, "message": say("y"),
                                                     "expect_position": 1, "expect_incarnation": key})

    result = asyncio.run(call())
    assert result.is_error and "expect_incarnation" in result.content[0].text
    assert _rows(mem, TENANT_A) == ["a: my flight to Oslo"]


def test_erasure_hooks_are_told_the_keys_and_callers_are_not(mem: Memory) -> None:
    heard: list[ErasureReport] = []
    mem.erasure_hooks.append(heard.append)
    key = mem.cold.key_of(TENANT_B, SHARED)
    assert key is not None and KEY_SEPARATOR in key
    report = mem.namespaced(TENANT_B).delete_conversation(SHARED)
    token = incarnation_token(mem.cold.db_uuid, key)
    assert report.keys == [token] and report.internal_keys == []
    [told] = heard
    assert told.keys == [token] and told.internal_keys == [key]
    assert KEY_SEPARATOR not in str(report.tenant_json()) + str(report.to_json())
