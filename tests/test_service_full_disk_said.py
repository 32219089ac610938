"""The HTTP service says a full disk is full: 507 "the disk holding the database's
directory is full", not "the database cannot grow", and never the server's path.

Before, the service called tiers.files `storage_problem` without the database's path, so
a write on a full disk answered 507 "storage full: the database cannot grow (database or
disk is full); nothing was written", the words of the database's size cap (and an I/O
error SQLite meets growing its -shm on a full disk would have been 503 "storage is
failing (disk I/O error): the write was rolled back", a read's included). The CLI says
it since 903d208 (tests/test_cli_full_disk_said.py). A read on the full disk is served
from the store the service holds open: it answers, and says nothing of a write.

The disk is a real tmpfs the test mounts (root only: skipped otherwise) and fills to the
last byte after emptying the store's WAL, so every write needs new blocks.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from hash_embedder import HashEmbedder
from ports import free_port
from service_helpers import READ_TIMEOUT_S, TOKEN_ACME, bearer, serve_in_thread
from tmpfs_helpers import FILLER, fill, mounted_tmpfs

from tiermem import Config, Memory
from tiermem.tiers.errors import WRITTEN_FIELD
from tiermem.tiers.files import INCOMPLETE_REQUEST_TEXT

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

TMPFS_SIZE = "4m"  # room for a one-message store (~300 KiB) and its sidecars
FULL = "storage full: the disk holding the database's directory is full"
CAP_WORDS = "the database cannot grow"  # the size cap's words: what a write said before
CONV = "c"
HISTORY = f"/v1/conversations/{CONV}/history"

# (method, path, JSON body, status, what the answer must say)
REQUESTS = [
    ("POST", f"/v1/conversations/{CONV}/messages", {"role": "user", "content": "more"}, 507,
     "; nothing was written"),  # one transaction: before, "the database cannot grow"
    ("POST", f"/v1/conversations/{CONV}/pins", {"position": 0}, 507,
     "; nothing was written"),  # a pin is a write too
    ("DELETE", f"/v1/conversations/{CONV}", None, 507,
     INCOMPLETE_REQUEST_TEXT),  # an erasure in batches: those before the failing one stay
    ("GET", HISTORY, None, 200, '"first"'),  # a read: served from the open store
    ("POST", "/v1/search", {"q": "first"}, 200, '"first"'),  # a read with its query in a body
]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A one-message store on a tmpfs of its own, served over real HTTP, the disk then
    filled to the last byte; (url, mount)."""
    with mounted_tmpfs(tmp_path / "mnt", TMPFS_SIZE) as mnt:
        config = Config(data_dir=mnt / "data", auth_tokens={TOKEN_ACME: "acme"},
                        redis_url=f"redis://127.0.0.1:{free_port()}/0")  # no hot tier: nothing of it on the disk
        with Memory(config, embedder=HashEmbedder(), hot=False, background_indexing=False) as mem:
            mem.append(CONV, {"role": "user", "content": "first"}, namespace="acme")
            with serve_in_thread(config, mem) as url:
                # the open store's WAL would take a write in the room it holds: empty it
                with contextlib.closing(sqlite3.connect(config.db_path)) as con:
                    assert con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0  # 0: not blocked
                fill(mnt)
                yield url, mnt


@pytest.mark.parametrize(("method", "path", "body", "status", "says"), REQUESTS)
def test_a_full_disk_is_said_as_full(served: tuple[str, Path], method: str, path: str, body: object,
                                     status: int, says: str) -> None:
    url, mnt = served
    r = httpx.request(method, url + path, headers=bearer(TOKEN_ACME), json=body, timeout=READ_TIMEOUT_S)
    assert r.status_code == status, r.text
    assert says in r.text, r.text
    if status == 507:
        detail = r.json()["detail"]
        assert detail.startswith(FULL), detail  # before: "storage full: the database cannot grow ..."
        assert CAP_WORDS not in detail, detail
        assert str(mnt) not in detail, detail  # the client is not told the server's paths
        assert WRITTEN_FIELD not in r.json(), r.json()  # a full disk's answer claims no refusal before writing
    # with room again the store answers as before: nothing was lost, and writes pass
    (mnt / FILLER).unlink()
    again = httpx.post(url + f"/v1/conversations/{CONV}/messages", headers=bearer(TOKEN_ACME),
                       json={"role": "user", "content": "with room"}, timeout=READ_TIMEOUT_S)
    assert again.status_code == 201, again.text
    history = httpx.get(url + HISTORY, headers=bearer(TOKEN_ACME), timeout=READ_TIMEOUT_S)
    contents = [m["message"]["content"] for m in history.json()["messages"]]
    # (an erasure refused at its first batch erased nothing either: a one-message store)
    assert contents == ["first", "with room"], contents
