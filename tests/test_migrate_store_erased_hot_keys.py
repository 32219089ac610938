"""`migrate-store` erasing in the target a conversation the source erased (c0832ca)
deletes that conversation's Redis keys too, as `Memory.delete_conversation` does. It
erased through the target store's `delete_conversation` with no hot link: the keys stayed
owed in the target's `redis_purge`, and a `tiermem serve` of the target kept the erased
text in Redis (its hot set, keys `{tm:<key>}*`, per incarnation) until hot_idle_ttl_s
or its next start. Now the CLI deletes them with the config's Redis (redis_url), else the
embedded one of the target's data dir where it runs; with neither it starts no Redis
and leaves them owed, for the next Memory that opens there.

Real PostgreSQL source (tests/pg_server.py), real SQLite target, real Redis servers."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner
from hot_fixtures import own_redis
from pg_server import fresh_schema, open_store

from tiermem import Config, Memory
from tiermem.cli import cli
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.models import Message
from tiermem.tiers.redis_server import EmbeddedRedis
from tiermem.tiers.tokens import BpeTokenCounter

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

NS = "ns"
GONE, KEPT = "b", "a"  # the source erases the first after the first run
CANARY = "zq7canary4471kumquat"  # the erased conversation's text
CONTEXT_BUDGET = 2000  # tokens: room for every message


def _keys_of(client: redis.Redis, key: str) -> list[bytes]:
    return sorted(client.scan_iter(match=f"{{tm:{key}}}*", count=1000))


@contextmanager
def _serving(target: Path, embedder: FastEmbedder, redis_url: str | None) -> Iterator[Memory]:
    """The target as `tiermem serve` would hold it: a Memory with its hot tier (the
    embedded Redis of `target` where `redis_url` is None)."""
    mem = Memory(Config(data_dir=target, redis_url=redis_url), embedder=embedder, background_indexing=False)
    try:
        yield mem
    finally:
        mem.close()


def _migrate(tmp_path: Path, source: str, target: Path, redis_url: str | None) -> None:
    url, schema = source.rsplit("#", 1)
    conf = tmp_path / "config"
    conf.mkdir(exist_ok=True)
    pre = []
    if redis_url is not None:
        (conf / "c.toml").write_text(f'redis_url = "{redis_url}"\n')
        pre = ["--config", str(conf / "c.toml")]
    r = CliRunner().invoke(cli, [*pre, "--data-dir", str(conf / "data"), "migrate-store", "--from", url,
                                 "--from-schema", schema, "--to", str(target)])
    assert r.exit_code == 0, r.output


def _scenario(tmp_path: Path, pg_url: str, counter: BpeTokenCounter, embedder: FastEmbedder,
              served_by: str | None, configured: str | None) -> tuple[str, str, Path]:
    """Copied, served (the hot sets in Redis), then GONE erased in the source and the
    migration rerun; (GONE's key, KEPT's, the target's data dir)."""
    source = f"{pg_url}#{fresh_schema()}"
    target = tmp_path / "target"
    url, schema = source.rsplit("#", 1)
    # written with their vectors, so that the served target's context embeds nothing
    # (a change of the copy, which the rerun would refuse to erase)
    with Memory(Config(data_dir=tmp_path / "source", cold_url=url, cold_schema=schema), embedder=embedder,
                hot=False, background_indexing=False) as writer:
        for name in (KEPT, GONE):
            writer.append(name, {"role": "user", "content": f"my code is {CANARY} for {name}"}, namespace=NS)
            writer.catch_up(name, namespace=NS)
    _migrate(tmp_path, source, target, configured)
    with _serving(target, embedder, served_by) as mem:
        for name in (KEPT, GONE):
            mem.context(name, "what is my code?", CONTEXT_BUDGET, namespace=NS)
        gone, kept = mem.cold.key_of(NS, GONE), mem.cold.key_of(NS, KEPT)
        assert gone is not None and kept is not None
    store = open_store(("postgres", source), counter)
    try:
        store.delete_conversation(store.key_of(NS, GONE))
    finally:
        store.close()
    _migrate(tmp_path, source, target, configured)
    return gone, kept, target


def _owed(target: Path, counter: BpeTokenCounter) -> list[str]:
    store = ColdStore(target / "tiermem.db", tokens=counter)
    try:
        return store.deferred_purges()
    finally:
        store.close()


def test_the_configured_redis_loses_the_erased_keys(tmp_path: Path, pg_url: str,
                                                    counter: BpeTokenCounter, embedder: FastEmbedder) -> None:
    with own_redis(tmp_path / "redis") as server:
        gone, kept, _target = _scenario(tmp_path, pg_url, counter, embedder, server.url, server.url)
        client = redis.Redis.from_url(server.url)
        try:
            assert _keys_of(client, gone) == []  # before: the hot set's keys, the erased text in them
            assert _keys_of(client, kept) != []  # the rest is left alone
        finally:
            client.close()


def test_the_target_data_dirs_running_redis_loses_them(tmp_path: Path, pg_url: str,
                                                       counter: BpeTokenCounter, embedder: FastEmbedder) -> None:
    target = tmp_path / "target"
    try:
        # a target served with the embedded Redis (the default); the migration's config names none
        gone, kept, target = _scenario(tmp_path, pg_url, counter, embedder, None, None)
        server = EmbeddedRedis(target)
        assert server.is_running()
        client = redis.Redis.from_url(server.url)
        try:
            assert _keys_of(client, gone) == []  # before: still there
            assert _keys_of(client, kept) != []
        finally:
            client.close()
    finally:
        EmbeddedRedis(target).stop()


def test_no_redis_running_starts_none_and_leaves_them_owed(tmp_path: Path, pg_url: str,
                                                           counter: BpeTokenCounter, embedder: FastEmbedder) -> None:
    target = tmp_path / "target"
    try:
        source = f"{pg_url}#{fresh_schema()}"
        store = open_store(("postgres", source), counter)
        try:
            store.append(GONE, Message(role="user", content=CANARY), namespace=NS)
        finally:
            store.close()
        _migrate(tmp_path, source, target, None)
        copy = ColdStore(target / "tiermem.db", tokens=counter)
        try:
            gone = copy.key_of(NS, GONE)
        finally:
            copy.close()
        store = open_store(("postgres", source), counter)
        try:
            store.delete_conversation(store.key_of(NS, GONE))
        finally:
            store.close()
        _migrate(tmp_path, source, target, None)
        assert not EmbeddedRedis(target).is_running()  # a migration starts no Redis
        assert not EmbeddedRedis(tmp_path / "config" / "data").is_running()
        assert _owed(target, counter) == [gone]  # the next Memory to open there deletes them
    finally:
        EmbeddedRedis(target).stop()
