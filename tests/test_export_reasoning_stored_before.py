"""A store the previous release wrote moves: since 593097c a reasoning item's `summary` is
required on append, and a row stored before with `summary: null` (or none) is still read
(a context sends it with `summary: []`), but `tiermem export` wrote it as stored and
`tiermem import` refused that line ("summary: must be a list, got null"), so such a store
could not be moved or restored. An export now writes the form append admits
(`tiers.formats.as_appended`: `summary: []`, which means the same), an import reads an
older release's line in that form too, and a re-import into the store it came from finds
the row present. A fork and migrate-store copy the row as stored, read as the original.
Real SQLite (and PostgreSQL for migrate-store); the old row written behind tiermem's back.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from cold_helpers import rewrite_stored
from convo_fixtures import write_jsonl
from pg_server import fresh_schema

from tiermem.cli import CliState, cli
from tiermem.config import Config
from tiermem.memory import Memory
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.migrate_store import migrate_store
from tiermem.tiers.tokens import BpeTokenCounter

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

CONV = "c"
ASK = {"role": "user", "content": "Which fare is cheaper?"}
REPLY = {"role": "assistant", "content": "The Tuesday one."}
CURRENT = {"type": "reasoning", "id": "r", "summary": []}  # the form append admits today
REASONING_AT = 1  # the reasoning row's position

# the row as the release before 593097c stored it
STORED_BEFORE = {
    # an explicit null (an SDK reply's model_dump() of a reasoning item with no summary)
    "null": '{"type": "reasoning", "id": "r", "summary": null}',
    # no summary at all
    "absent": '{"type": "reasoning", "id": "r"}',
}


def tm(embedder: FastEmbedder, data: Path, *args: str) -> Any:
    r = CliRunner().invoke(cli, ["--data-dir", str(data), *args], obj=CliState(embedder=embedder),
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r


def _open(data: Path, embedder: FastEmbedder, **config: Any) -> Memory:
    return Memory(Config(data_dir=data, **config), embedder=embedder, hot=False, background_indexing=False)


def old_store(data: Path, embedder: FastEmbedder, stored_json: str) -> None:
    """A store with the reasoning row as the older release stored it."""
    with _open(data, embedder) as mem:
        mem.append_many(CONV, [ASK, CURRENT, REPLY])
        key = mem.cold.key_of("default", CONV)
        assert key is not None
    rewrite_stored(Config(data_dir=data).db_path, key, [(REASONING_AT, "body", stored_json)])


def read(mem: Memory, conv: str = CONV) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the bodies history returns, the reasoning items a context sends)."""
    sent = [m for m in mem.context(conv, "fares?", 2000).messages if m.get("type") == "reasoning"]
    return [m.body for m in mem.history(conv)], sent


@pytest.mark.parametrize("stored_json", STORED_BEFORE.values(), ids=STORED_BEFORE.keys())
def test_an_export_of_it_imports_into_a_fresh_data_dir(tmp_path: Path, embedder: FastEmbedder,
                                                      stored_json: str) -> None:
    first, second, out = tmp_path / "d1", tmp_path / "d2", tmp_path / "out.jsonl"
    old_store(first, embedder, stored_json)
    tm(embedder, first, "export", "-o", str(out))
    assert [json.loads(x)["message"] for x in out.read_text().splitlines()] == [ASK, CURRENT, REPLY]
    tm(embedder, second, "import", str(out))
    with _open(second, embedder) as mem:
        # stored in the form the original is sent in, and sent the same
        assert read(mem) == ([ASK, CURRENT, REPLY], [CURRENT])
    with _open(first, embedder) as mem:
        assert read(mem) == ([ASK, json.loads(stored_json), REPLY], [CURRENT])  # the original as stored
    again = json.loads(tm(embedder, first, "import", str(out), "--json").stdout)
    assert (again["appended"], again["already_present"]) == (0, 3)  # found present where it came from


@pytest.mark.parametrize("stored_json", STORED_BEFORE.values(), ids=STORED_BEFORE.keys())
def test_an_older_release_export_line_imports(tmp_path: Path, embedder: FastEmbedder, stored_json: str) -> None:
    # the line that release's export wrote: the row as stored
    lines = [{"conversation_id": CONV, "message": m} for m in (ASK, json.loads(stored_json), REPLY)]
    tm(embedder, tmp_path / "d", "import", str(write_jsonl(tmp_path / "old.jsonl", lines)))
    with _open(tmp_path / "d", embedder) as mem:
        assert read(mem) == ([ASK, CURRENT, REPLY], [CURRENT])


def test_a_fork_copies_it_as_stored(tmp_path: Path, embedder: FastEmbedder) -> None:
    old_store(tmp_path / "d", embedder, STORED_BEFORE["null"])
    with _open(tmp_path / "d", embedder) as mem:
        fork = mem.fork(CONV, 2)
        assert read(mem, fork) == read(mem)


def test_migrate_store_copies_it_as_stored(tmp_path: Path, embedder: FastEmbedder, pg_url: str,
                                           counter: BpeTokenCounter) -> None:
    old_store(tmp_path / "d", embedder, STORED_BEFORE["null"])
    schema = fresh_schema()
    report = migrate_store(tmp_path / "d", pg_url, tokens=counter, target_schema=schema)
    assert (report.conversations, report.copied) == (1, 1)
    with _open(tmp_path / "d", embedder) as mem:
        want = read(mem)
    with _open(tmp_path / "moved", embedder, cold_url=pg_url, cold_schema=schema) as mem:
        assert read(mem) == want
