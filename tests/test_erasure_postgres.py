"""Erasure and prune on PostgreSQL, checked on real bytes (DESIGN invariant 3), as
tests/test_erasure.py does for the SQLite file: a canary planted in a conversation (its
messages, turn rows, FTS text and lexemes, a pin, a checkpoint, warm summaries, stored
plans) is found in no data file of the cluster after the erasure and a CHECKPOINT, with
the default `erase_scrub="full"`.

What PostgreSQL cannot scrub is not read here, and the README says so: the WAL
(`pg_wal/`, archives, replicas) keeps the records until its segments are recycled. The
fast `erase_scrub="vacuum"` is shown NOT to guarantee it (a GIN index keeps every lexeme
it saw; a plain VACUUM leaves fragments in the page's free space): that is the old
behaviour of this store, and why "full" is the default.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from pg_server import fresh_schema
from psycopg.conninfo import conninfo_to_dict

import tiermem
from tiermem import Config, Memory
from tiermem.tiers.embed import Embedder


def data_dir(url: str) -> Path:
    """The server's data directory: the embedded server listens on a unix socket in it."""
    host = conninfo_to_dict(url).get("host")
    assert host, url
    return Path(str(host))


def files_with(pgdata: Path, needle: bytes) -> list[str]:
    """Data files holding `needle`, WAL excluded (PostgreSQL cannot scrub it)."""
    found = []
    for p in pgdata.rglob("*"):
        if p.is_file() and "pg_wal" not in p.relative_to(pgdata).parts and needle in p.read_bytes():
            found.append(str(p.relative_to(pgdata)))
    return found


def checkpoint(url: str) -> None:
    # dirty pages reach their files (what a crash-and-read or a disk image would see)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CHECKPOINT")


@pytest.fixture
def canary() -> str:
    # one word (no hyphen): the full-text parser keeps it as one lexeme, so the GIN
    # index holds these very bytes too; unique, so no other test's rows match it
    return f"zq7canary{uuid.uuid4().hex}kumquat"


def make_memory(tmp_path: Path, url: str, embedder: Embedder, scrub: str) -> Memory:
    cfg = Config(data_dir=tmp_path / "data", cold_url=url, cold_schema=fresh_schema(), store_plans=True,
                 cold_erase_scrub=scrub)  # type: ignore[arg-type]
    return Memory(cfg, embedder=embedder, hot=False, background_indexing=False)


@pytest.fixture
def pg_memory(tmp_path: Path, pg_url: str, embedder: Embedder) -> Iterator[Memory]:
    with make_memory(tmp_path, pg_url, embedder, "full") as mem:
        yield mem


def plant(mem: Memory, canary: str, ns: str = "acme/alice", conv: str = "secret") -> None:
    turns = [{"role": "user", "content": f"Line {i} of the support thread about the router."} for i in range(24)]
    turns[5] = {"role": "user", "content": f"Never share my recovery code {canary} with anyone."}
    # a long one too: stored out of line (TOAST) once past ~2 kB; random words resist compression
    turns[7] = {"role": "user", "content": " ".join(uuid.uuid4().hex for _ in range(120)) + f" {canary}"}
    mem.append_many(conv, turns, namespace=ns)
    mem.catch_up()
    mem.pin(conv, 5, namespace=ns)
    mem.checkpoint(conv, f"The user keeps recovery code {canary}.", 10, namespace=ns)
    mem.consolidate(conv, namespace=ns)
    ctx = mem.context(conv, "what is my recovery code?", 2000, namespace=ns)
    assert canary in json.dumps(ctx.messages)  # it is everywhere before


ERASURES: list[tuple[str, Callable[[Memory], tiermem.ErasureReport]]] = [
    # erasure of one conversation on request
    ("delete_conversation", lambda m: m.delete_conversation("secret", namespace="acme/alice")),
    # erasure of a user's whole namespace (the tenant's is the same statement with a prefix)
    ("delete_namespace", lambda m: m.delete_namespace("acme/alice")),
    # retention by age
    ("prune", lambda m: m.prune(0, namespace="acme/alice")),
]


@pytest.mark.parametrize(("how", "erase"), ERASURES, ids=[e[0] for e in ERASURES])
def test_no_byte_of_an_erased_conversation_survives_in_the_data_files(
        pg_memory: Memory, pg_url: str, canary: str, how: str,
        erase: Callable[[Memory], tiermem.ErasureReport]) -> None:
    pgdata = data_dir(pg_url)
    plant(pg_memory, canary)
    pg_memory.append("kept", {"role": "user", "content": "acme/bob keeps his own thread."}, namespace="acme/bob")
    needle = canary.encode()
    checkpoint(pg_url)
    assert files_with(pgdata, needle)  # the probe finds it before

    report = erase(pg_memory)
    checkpoint(pg_url)

    assert report.conversation_ids == ["secret"] and report.messages == 24
    assert files_with(pgdata, needle) == []
    (stone,) = pg_memory.tombstones(namespace="acme/alice")
    assert stone["reason"] == ("prune" if how == "prune" else "erase") and canary not in json.dumps(stone)
    assert pg_memory.history("kept", namespace="acme/bob")[0].text == "acme/bob keeps his own thread."
    with pytest.raises(tiermem.ConversationNotFound):
        pg_memory.history("secret", namespace="acme/alice")
    # the id starts from nothing when used again, and the rewritten tables still work
    pg_memory.append("secret", {"role": "user", "content": "a new beginning"}, namespace="acme/alice")
    pg_memory.catch_up()
    ctx = pg_memory.context("secret", "what is my recovery code?", 2000, namespace="acme/alice")
    assert canary not in json.dumps(ctx.messages) + ctx.plan.explain()
    assert pg_memory.search("secret", "new beginning", 1, namespace="acme/alice")[0].position == 0


def test_the_fast_scrub_does_not_guarantee_it(tmp_path: Path, pg_url: str, embedder: Embedder,
                                              canary: str) -> None:
    """`erase_scrub="vacuum"` (what this store did before): the rows are gone through
    SQL, but the bytes stay in the files (GIN keeps lexemes; free space is not zeroed)."""
    with make_memory(tmp_path, pg_url, embedder, "vacuum") as mem:
        plant(mem, canary)
        mem.delete_conversation("secret", namespace="acme/alice")
        checkpoint(pg_url)
        assert mem.conversations("acme/alice") == []
        assert files_with(data_dir(pg_url), canary.encode()) != []
        # an explicit full reclaim scrubs what the fast one left
        mem.cold.reclaim(full=True)  # type: ignore[call-arg]
        checkpoint(pg_url)
        assert files_with(data_dir(pg_url), canary.encode()) == []


def test_an_unknown_scrub_mode_is_refused_naming_the_field(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="cold_erase_scrub"):
        Config(data_dir=tmp_path, cold_erase_scrub="zero")  # type: ignore[arg-type]
