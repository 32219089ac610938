"""What tiermem leaves on disk is private, stays inside data_dir, and a refusing process
touches nothing (issue 13, item 9).

Before the fix: `redis.pid` and `redis.log` were 0644 (redis-server made them under the
caller's umask) and missing parents of the data dir 0755; `db_filename` was not
validated (an absolute path escaped data_dir, an empty one failed with `[Errno 17] File
exists`); a database newer than the code was refused, but chmodded first.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pydantic
import pytest
from cold_helpers import raw

from tiermem import Config, Memory
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.errors import SchemaTooNew
from tiermem.tiers.redis_server import EmbeddedRedis
from tiermem.tiers.schema import schema_version
from tiermem.tiers.tokens import BpeTokenCounter

LOOSE_UMASK = 0o022  # the common default, under which a plain create gives 0644 / 0755


@pytest.fixture
def loose_umask() -> Iterator[None]:
    old = os.umask(LOOSE_UMASK)
    try:
        yield
    finally:
        os.umask(old)


def mode(p: Path) -> int:
    return stat.S_IMODE(p.lstat().st_mode)


def test_every_file_is_0600_and_every_directory_0700(tmp_path: Path, embedder: FastEmbedder,
                                                    loose_umask: None) -> None:
    top = tmp_path / "made"  # none of made/by/tiermem exists yet: tiermem creates all three
    data = top / "by" / "tiermem"
    mem = Memory(Config(data_dir=data), embedder=embedder, background_indexing=False)
    try:
        mem.append("c-1", {"role": "user", "content": "hello"})
        assert mem.hot is not None and mem.hot.embedded is not None
        made = [p for p in [top, *top.rglob("*")] if not stat.S_ISSOCK(p.lstat().st_mode)]
        names = {p.name for p in made}
        # the files this test is about are there to be checked
        assert {"tiermem.db", "tiermem.db-wal", "tiermem.db-shm", "redis.pid", "redis.log", "launch.lock"} <= names
        for p in made:
            want = 0o700 if p.is_dir() else 0o600
            assert mode(p) == want, f"{p.relative_to(tmp_path)} is {oct(mode(p))}, want {oct(want)}"
        sock = mem.hot.embedded.socket_path
        assert mode(sock) & 0o077 == 0, oct(mode(sock))
        assert mode(sock.parent) == 0o700
    finally:
        mem.close()
        EmbeddedRedis(data).stop()


def test_an_existing_data_dir_keeps_its_mode(tmp_path: Path, counter: BpeTokenCounter, loose_umask: None) -> None:
    """Only what tiermem creates is made private: a directory the user chose keeps its mode."""
    data = tmp_path / "shared"
    data.mkdir(mode=0o755)
    os.chmod(data, 0o755)
    ColdStore(data / "tiermem.db", tokens=counter).close()
    assert mode(data) == 0o755
    assert mode(data / "tiermem.db") == 0o600


# (db_filename, what the error says) -- each escapes data_dir or names no file
BAD_DB_FILENAMES = [
    ("", "empty"),
    ("   ", "empty"),
    ("/etc/tiermem.db", "plain file name"),  # absolute: would escape data_dir
    ("../tiermem.db", "plain file name"),  # a parent: escapes too
    ("..", "plain file name"),
    (".", "plain file name"),
    ("sub/tiermem.db", "plain file name"),  # a directory part
    ("sub\\tiermem.db", "plain file name"),  # a Windows separator
    ("tier\x00mem.db", "plain file name"),  # NUL would cut the path in C
]


@pytest.mark.parametrize(("name", "says"), BAD_DB_FILENAMES)
def test_db_filename_must_be_a_plain_file_name(tmp_path: Path, name: str, says: str) -> None:
    with pytest.raises(pydantic.ValidationError) as info:
        Config(data_dir=tmp_path / "data", db_filename=name)
    (err,) = info.value.errors()
    assert err["loc"] == ("db_filename",) and says in err["msg"], err
    assert not (tmp_path / "data").exists()


def test_a_plain_db_filename_is_used(tmp_path: Path, counter: BpeTokenCounter) -> None:
    cfg = Config(data_dir=tmp_path / "data", db_filename="agent-1.sqlite")
    assert cfg.db_path == tmp_path / "data" / "agent-1.sqlite"


@pytest.mark.parametrize("file_mode", [0o600, 0o640])
def test_a_newer_database_is_refused_without_a_chmod(tmp_path: Path, counter: BpeTokenCounter,
                                                     file_mode: int) -> None:
    db = tmp_path / "data" / "tiermem.db"
    ColdStore(db, tokens=counter).close()
    with raw(db) as conn:
        conn.execute("PRAGMA journal_mode = DELETE")
        conn.execute(f"PRAGMA user_version = {schema_version() + 1}")
    os.chmod(db, file_mode)  # e.g. a group-readable file another tool made: not ours to change
    before = os.stat(db)
    with pytest.raises(SchemaTooNew):
        ColdStore(db, tokens=counter)
    after = os.stat(db)
    assert stat.S_IMODE(after.st_mode) == file_mode
    # a chmod to the same mode still changes ctime: the old code's chmod shows here
    assert (after.st_ctime_ns, after.st_mtime_ns, after.st_size) == (before.st_ctime_ns, before.st_mtime_ns,
                                                                      before.st_size)
