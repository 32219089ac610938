"""Erasure on request and prune, checked on real bytes (DESIGN invariant 3): after
either, a canary planted in a conversation is found nowhere: not in the SQLite file, not
in its WAL, not in any Redis key or value; a tombstone with counts and no content is
what is left. Derived data stays proportional to the log (issue 13, break 10)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from conftest import full_memory

import tiermem
from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.redis_server import EmbeddedRedis

CANARY = "zq7canary-4471-kumquat"


@pytest.fixture
def planned(tmp_path: Path, embedder: FastEmbedder) -> Iterator[Memory]:
    """A full Memory that also stores its plans (plans quote turns)."""
    with full_memory(Config(data_dir=tmp_path / "data", hot_budget_tokens=600, store_plans=True), embedder) as mem:
        yield mem


def _plant(mem: Memory, ns: str, conv: str) -> None:
    turns = [{"role": "user", "content": f"Line {i} of the support thread about the router."} for i in range(24)]
    turns[5] = {"role": "user", "content": f"Never share my recovery code {CANARY} with anyone."}
    mem.append_many(conv, turns, namespace=ns)
    mem.pin(conv, 5, namespace=ns)
    mem.checkpoint(conv, f"The user keeps recovery code {CANARY}.", 10, namespace=ns)
    mem.consolidate(conv, namespace=ns)
    ctx = mem.context(conv, "what is my recovery code?", 2000, namespace=ns)
    assert CANARY in json.dumps(ctx.messages)  # it is everywhere before


def _files_with(db: Path, needle: bytes) -> list[str]:
    found = []
    for suffix in ("", "-wal", "-shm", "-journal"):
        p = Path(str(db) + suffix)
        if p.exists() and needle in p.read_bytes():
            found.append(p.name)
    return found


def _redis_with(mem: Memory, needle: bytes) -> list[bytes]:
    assert mem.hot is not None
    client = redis.Redis.from_url(EmbeddedRedis(mem.config.data_dir).url)
    try:
        hits = []
        for key in client.scan_iter(count=1000):
            # the value as Redis returns it, not DUMP's encoding (which may compress it)
            if needle in key or needle in repr(_value(client, key)).encode():
                hits.append(key)
        return hits
    finally:
        client.close()


def _value(client: redis.Redis, key: bytes) -> object:
    kind = client.type(key)
    return {b"string": client.get, b"hash": client.hgetall, b"zset": lambda k: client.zrange(k, 0, -1),
            b"set": client.smembers, b"list": lambda k: client.lrange(k, 0, -1)}.get(kind, lambda k: None)(key)


ERASURES: list[tuple[str, Callable[[Memory], tiermem.ErasureReport]]] = [
    # erasure of one conversation on request
    ("delete_conversation", lambda m: m.delete_conversation("secret", namespace="acme/alice")),
    # erasure of a user's whole namespace
    ("delete_namespace", lambda m: m.delete_namespace("acme/alice")),
    # the tenant's namespace takes its users' with it
    ("delete_tenant", lambda m: m.delete_namespace("acme")),
    # retention by age
    ("prune", lambda m: m.prune(0, namespace="acme/alice")),
]


@pytest.mark.parametrize(("how", "erase"), ERASURES, ids=[e[0] for e in ERASURES])
def test_no_byte_of_an_erased_conversation_survives(
    planned: Memory, how: str, erase: Callable[[Memory], tiermem.ErasureReport]
) -> None:
    _plant(planned, "acme/alice", "secret")
    planned.append("kept", {"role": "user", "content": "acme/bob keeps his own thread."}, namespace="acme/bob")
    needle = CANARY.encode()
    assert _files_with(planned.cold.path, needle)
    assert _redis_with(planned, needle)

    report = erase(planned)

    tenant = how == "delete_tenant"
    # by namespace, then name (tiers.dialect.ERASURE_ORDER): acme/alice before acme/bob
    assert report.conversation_ids == (["secret", "kept"] if tenant else ["secret"])
    assert report.messages == 24 + (1 if tenant else 0)
    assert _files_with(planned.cold.path, needle) == []
    assert _redis_with(planned, needle) == []
    assert Path(str(planned.cold.path) + "-wal").stat().st_size == 0  # the WAL was truncated
    # a tombstone: who, when, how much; no content
    (stone,) = planned.tombstones(namespace="acme/alice")
    assert stone["id"] == "secret" and stone["messages"] == 24
    assert stone["reason"] == ("prune" if how == "prune" else "erase")
    assert CANARY not in json.dumps(stone)
    with pytest.raises(tiermem.ConversationNotFound):
        planned.history("secret", namespace="acme/alice")
    # the tenant's other user is untouched unless the tenant was erased
    assert planned.conversations("acme/bob") == ([] if tenant else ["kept"])
    # and the id starts from nothing when used again
    planned.append("secret", {"role": "user", "content": "a new beginning"}, namespace="acme/alice")
    ctx = planned.context("secret", "what is my recovery code?", 2000, namespace="acme/alice")
    assert CANARY not in json.dumps(ctx.messages) + ctx.plan.explain()


def test_erasure_of_a_missing_conversation_is_not_found_and_writes_nothing(cold_memory: Memory) -> None:
    cold_memory.append("mine", {"role": "user", "content": "x"}, namespace="a")
    with pytest.raises(tiermem.ConversationNotFound):
        cold_memory.delete_conversation("mine", namespace="b")
    assert cold_memory.tombstones(namespace="b") == [] and cold_memory.conversations("a") == ["mine"]


def test_delete_namespace_takes_children_never_siblings(cold_memory: Memory) -> None:
    for ns in ("acme", "acme/alice", "acme/alice/work", "acme2", "acmeX/alice"):
        cold_memory.append("c", {"role": "user", "content": ns}, namespace=ns)
    report = cold_memory.delete_namespace("acme")
    assert report.conversations == 3
    assert cold_memory.conversations("acme2") == ["c"] and cold_memory.conversations("acmeX/alice") == ["c"]


def test_erasure_with_redis_down_purges_redis_when_it_returns(planned: Memory) -> None:
    _plant(planned, "acme/alice", "secret")
    needle = CANARY.encode()
    assert planned.hot is not None
    real = planned.hot.tier.client
    planned.hot.tier.client = redis.Redis(unix_socket_path="/nonexistent/redis.sock")  # unreachable
    try:
        planned.delete_conversation("secret", namespace="acme/alice")
    finally:
        planned.hot.tier.client = real
    assert _redis_with(planned, needle)  # still in Redis: it could not be reached
    assert planned.cold.deferred_purges()
    assert planned.purge_deferred() == 1
    assert _redis_with(planned, needle) == [] and planned.cold.deferred_purges() == []


def test_derived_data_stays_proportional_to_the_log(cold_memory: Memory) -> None:
    """Break 10: 200 consolidations of 5 turns left derived data at 11.9x the log. With
    the last `warm_keep_versions` versions kept, it stays under 1.5x (measured for 200
    rounds by `python -m tiermem.evals.retention`; 40 here)."""
    keep = cold_memory.config.warm_keep_versions
    for r in range(40):
        cold_memory.append_many("c", [{"role": "user", "content": f"Round {r} note {i}: the build on runner {i} "
                                       f"failed with exit code {r + i}."} for i in range(5)])
        cold_memory.consolidate("c")
    cold_memory.checkpoint("c", "A fold the caller wrote.", 3)
    rows = cold_memory.cold._read("SELECT kind, key, COUNT(*) FROM summaries GROUP BY kind, key")
    assert rows and all(n <= keep for _k, _key, n in rows)
    folds = cold_memory.cold._read(
        "SELECT COUNT(*) FROM checkpoints WHERE json_extract(metadata, '$.source') = 'warm'")[0][0]
    assert folds <= keep
    # the caller's checkpoint is kept whatever consolidation does next
    cold_memory.append_many("c", [{"role": "user", "content": f"late note {i}"} for i in range(5)])
    cold_memory.consolidate("c")
    assert any(cp[0] == "A fold the caller wrote." for cp in cold_memory.cold._read("SELECT summary FROM checkpoints"))
    log_bytes = cold_memory.cold._read("SELECT SUM(length(body)) FROM messages")[0][0]
    derived = cold_memory.cold._read(
        "SELECT (SELECT COALESCE(SUM(length(body)), 0) FROM summaries) + "
        "(SELECT COALESCE(SUM(length(summary)), 0) FROM checkpoints)")[0][0]
    assert derived <= 1.5 * log_bytes, (derived, log_bytes)


def test_erasure_leaves_no_copy_of_the_text_in_the_embedders_memory(cold_memory: Memory) -> None:
    """The embedder remembers recent texts' vectors keyed by the text; an erasure clears
    it (before, Memory looked for a `clear_memo` no embedder had, and the text stayed)."""
    emb = cold_memory.embedder
    old_size = getattr(emb, "memo_size", 0)
    emb.memo_size = 64  # type: ignore[attr-defined]  # the session fixture may have it off
    try:
        text = f"My recovery code is {CANARY}."
        cold_memory.append("secret", {"role": "user", "content": text})
        emb.embed([text])
        assert any(CANARY in t for t in emb._memo)  # type: ignore[attr-defined]
        cold_memory.delete_conversation("secret")
        assert not any(CANARY in t for t in emb._memo)  # type: ignore[attr-defined]
    finally:
        emb.memo_size = old_size  # type: ignore[attr-defined]


def test_erasure_leaves_no_copy_of_the_text_in_the_counters_or_supersessions_memory(cold_memory: Memory) -> None:
    """The token counter remembers short texts' counts keyed by the text, and supersession
    caches what it read of recent texts (slots, content words, inflections); an erasure
    clears both (before, the text stayed in them: an audit, 2026-12-03)."""
    from tiermem.consolidation import supersede

    text = f"Actually my locker code is now {CANARY}, not the old one."
    cold_memory.append("secret", {"role": "user", "content": "My locker code is 1234."})
    cold_memory.append("secret", {"role": "user", "content": text})
    cold_memory.context("secret", "what is my locker code?", 500)
    counts = cold_memory.tokens._memo  # type: ignore[attr-defined]
    assert any(CANARY in t for t in counts)
    assert supersede._content_items.cache_info().currsize > 0
    cold_memory.delete_conversation("secret")
    assert not any(CANARY in t for t in cold_memory.tokens._memo)  # type: ignore[attr-defined]
    for cached in (supersede._slots, supersede._content_items, supersede._inflected):
        assert cached.cache_info().currsize == 0


def test_erasure_leaves_no_copy_of_the_words_in_the_keyword_stem_memo(cold_memory: Memory) -> None:
    """Keyword search remembers every word it stemmed (tiers/lexical.py), process-wide; an
    erasure forgets them (before, an erased turn's words stayed there until 200,000 other
    words filled the memo: a scale audit, 2026-12-05)."""
    from tiermem.tiers import lexical

    word = CANARY.replace("-", "")  # one token, as the index splits it
    cold_memory.append("secret", {"role": "user", "content": f"My vault word is {word}."})
    cold_memory.search("secret", "vault word")
    lexical.doc_terms(f"My vault word is {word}.")  # what search_bm25 does with each match it reads
    assert word in lexical._terms
    cold_memory.delete_conversation("secret")
    assert word not in lexical._terms


def test_erasure_leaves_no_keyword_statistics_of_the_conversation(cold_memory: Memory) -> None:
    """Keyword search remembers each conversation's turn and word counts (its BM25
    statistics); an erasure drops the erased conversation's (before, they stayed until
    65,536 other conversations pushed them out)."""
    cold_memory.append("secret", {"role": "user", "content": f"My vault word is {CANARY}."})
    cold_memory.search("secret", "vault word")
    key = cold_memory.cold.key_of("default", "secret")
    assert key is not None and key in cold_memory.cold._scope_sizes  # type: ignore[attr-defined]
    cold_memory.delete_conversation("secret")
    assert key not in cold_memory.cold._scope_sizes  # type: ignore[attr-defined]
