"""The HTTP erasure routes on a full disk say the erasure may be partial and is safe to
send again, not "nothing was written".

`DELETE /v1/conversations/{id}`, `DELETE /v1/namespace` and `POST /v1/prune` erase in
batches, each its own transaction (Memory.delete_conversation, delete_namespace, prune):
a full disk partway leaves the batches before it erased. They answered 507 "storage full:
...; nothing was written", so a client told nothing changed would not send it again
(and the erasure stayed partial). The CLI's erasures say it since fdfa27f
(tests/test_cli_storage_full_incomplete.py); a single-transaction write (an append)
still says nothing was written, which is true of it.

The disk is a real tmpfs the test mounts (root only: skipped otherwise) and fills,
leaving room for SQLite's -shm and a few WAL frames, less than any write here needs.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from ports import free_port
from service_helpers import READ_TIMEOUT_S, TOKEN_ACME, bearer, serve_in_thread
from tmpfs_helpers import fill, mounted_tmpfs

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.errors import WRITTEN_FIELD
from tiermem.tiers.files import INCOMPLETE_REQUEST_TEXT

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

TMPFS_SIZE = "16m"  # room for the store (~1 MB), were it not filled
CONVERSATIONS = 4
TURNS = 120  # over CONVERSATIONS: every table has rows to erase
LEAVE_BYTES = 0  # the -shm is open already: no room at all
NOTHING_WRITTEN = "nothing was written"

# (method, path, extra headers, JSON body, what the 507 must say): the erasures in batches,
# and an append (one transaction) whose "nothing was written" stays true
REQUESTS = [
    ("DELETE", "/v1/conversations/c0", {}, None, INCOMPLETE_REQUEST_TEXT),  # one conversation, erased in batches
    ("DELETE", "/v1/namespace", {"X-Tiermem-Namespace": "acme"}, None, INCOMPLETE_REQUEST_TEXT),  # every conversation
    ("POST", "/v1/prune", {}, {"older_than_seconds": 0}, INCOMPLETE_REQUEST_TEXT),  # one transaction per conversation
    ("POST", "/v1/conversations/c1/messages", {}, {"role": "user", "content": "one more"}, NOTHING_WRITTEN),
]


@pytest.fixture
def served(tmp_path: Path, embedder: FastEmbedder) -> Iterator[tuple[str, Path]]:
    """A store of TURNS turns on a tmpfs of its own, served over real HTTP; (url, mount)."""
    with mounted_tmpfs(tmp_path / "mnt", TMPFS_SIZE) as mnt:
        config = Config(data_dir=mnt / "data", auth_tokens={TOKEN_ACME: "acme"},
                        redis_url=f"redis://127.0.0.1:{free_port()}/0")  # no hot tier: nothing of it on the disk
        with Memory(config, embedder=embedder, hot=False, background_indexing=False) as mem:
            for i in range(TURNS):
                mem.append(f"c{i % CONVERSATIONS}", {"role": "user", "content": f"turn {i}: project {i * 7 % 97}"},
                           namespace="acme")
            mem.catch_up()
            with serve_in_thread(config, mem) as url:
                yield url, mnt


@pytest.mark.parametrize(("method", "path", "headers", "body", "says"), REQUESTS)
def test_a_full_disk_answer_says_what_the_route_left(served: tuple[str, Path], method: str, path: str,
                                                      headers: dict[str, str], body: object, says: str) -> None:
    url, mnt = served
    # the open store's WAL file would take the writes in the room it already holds: empty
    # it, so that every write here needs new blocks
    with contextlib.closing(sqlite3.connect(mnt / "data" / "tiermem.db")) as con:
        assert con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0  # 0: not blocked
    fill(mnt, LEAVE_BYTES)
    r = httpx.request(method, url + path, headers={**bearer(TOKEN_ACME), **headers}, json=body,
                      timeout=READ_TIMEOUT_S)
    assert r.status_code == 507, r.text
    detail = r.json()["detail"]
    assert detail.startswith("storage full") and says in detail, detail  # before: "...; nothing was written"
    other = NOTHING_WRITTEN if says == INCOMPLETE_REQUEST_TEXT else INCOMPLETE_REQUEST_TEXT
    assert other not in detail, detail
    # a client retries a write on "written": false alone: an erasure that may have erased carries none
    assert WRITTEN_FIELD not in r.json(), r.json()
