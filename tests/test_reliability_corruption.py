"""Corruption: garbled message rows are salvaged (the others load, the bad ones counted), a
WAL torn mid-frame opens with its committed prefix intact, and a dropped vector table is
restored by repair. Real SQLite files; no server (the damage is done to files)."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pytest
from cold_helpers import has_table, raw
from reliability_helpers import record_figure
from test_cold_salvage import corrupt

from tiermem import Config, Memory
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.models import Message
from tiermem.tiers.schema import VEC_TABLE
from tiermem.tiers.tokens import BpeTokenCounter

WAL_HEADER = 32
FRAME_HEADER = 24


def test_garbled_rows_are_salvaged_and_counted(tmp_path: Path, embedder: FastEmbedder) -> None:
    cfg = Config(data_dir=tmp_path / "data")
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        for i in range(10):
            mem.append("garbled", {"role": "user", "content": f"message number {i} about sailing"})
    bad = {2: "'{\"role\":\"user\",\"content\":\"trunc'", 5: "'[1,2]'", 7: "X'00FF00'"}
    for pos, value in bad.items():
        corrupt(cfg.db_path, "garbled", pos, "body", value)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        got = [m.position for m in mem.history("garbled")]
        assert got == [p for p in range(10) if p not in bad]
        assert mem.stats()["cold"]["salvaged_rows"] == len(bad)
        ctx = mem.context("garbled", "sailing?", 400)  # the planner skips them too
        assert ctx.tokens <= 400 and ctx.messages
        hits = mem.search("garbled", "sailing", 10)
        assert hits and all(h.position not in bad for h in hits if h.text)
        # a rebuild of the derived indexes skips them again, and keeps every valid row
        mem.rebuild()
        assert [m.position for m in mem.history("garbled")] == got
        assert mem.append("garbled", {"role": "user", "content": "after"}) == 10
    record_figure("corruption: garbled rows salvaged (skipped, counted) / valid rows kept",
                  f"{len(bad)} / {10 - len(bad)}", "", "pytest tests/test_reliability_corruption.py")


def test_truncated_wal_opens_with_its_committed_prefix(tmp_path: Path) -> None:
    src = tmp_path / "src" / "tiermem.db"
    store = ColdStore(src, tokens=BpeTokenCounter(), embedder=None)
    # no checkpoints: the main file stays as it is and every commit lands in the WAL, so a
    # copy taken while writing is a consistent main file plus a WAL cut anywhere
    with store._lock:
        store._conn.execute("PRAGMA wal_autocheckpoint = 0")
    store.append("torn", Message(role="user", content="first"))
    written: list[str] = []
    stop = threading.Event()

    def writer() -> None:
        i = 0
        while not stop.is_set():
            content = f"row {i} " + "padding " * (i % 50)
            store.append("torn", Message(role="user", content=content))
            written.append(content)
            i += 1

    t = threading.Thread(target=writer)
    t.start()
    try:
        while len(written) < 50:
            time.sleep(0.01)
        dst = tmp_path / "copy" / "tiermem.db"
        dst.parent.mkdir()
        shutil.copyfile(src, dst)  # the main file first, then the WAL, as a backup tool would
        shutil.copyfile(Path(str(src) + "-wal"), Path(str(dst) + "-wal"))
    finally:
        stop.set()
        t.join()
        store.close()
    wal = Path(str(dst) + "-wal")
    with raw(src) as c:
        page_size = c.execute("PRAGMA page_size").fetchone()[0]
    frame = FRAME_HEADER + page_size
    frames = (wal.stat().st_size - WAL_HEADER) // frame
    assert frames > 4
    cut = WAL_HEADER + (frames // 2) * frame + FRAME_HEADER + page_size // 3  # mid-frame
    with wal.open("r+b") as f:
        f.truncate(cut)
    copy = ColdStore(dst, tokens=BpeTokenCounter(), embedder=None)
    try:
        with copy._lock:
            assert copy._conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        hist = copy.history("torn")
        n = len(hist)
        assert [m.position for m in hist] == list(range(n))
        assert hist[0].text == "first"
        # exactly a prefix of what was committed, in order
        assert [m.text for m in hist[1:]] == written[: n - 1]
        assert copy.integrity()["turns"] == copy.integrity()["messages"] == n
        assert copy.append("torn", Message(role="user", content="after")) == n
    finally:
        copy.close()
    record_figure("corruption: WAL torn mid-frame: committed prefix recovered",
                  f"{n - 1} of {len(written)} rows", "", "pytest tests/test_reliability_corruption.py")


def test_dropped_vector_table_is_rebuilt(tmp_path: Path, embedder: FastEmbedder) -> None:
    cfg = Config(data_dir=tmp_path / "data")
    texts = ["the ferry to Naxos leaves at nine", "my cat is called Pixel", "we booked the blue hotel"]
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        for t in texts:
            mem.append("vec", {"role": "user", "content": t})
        mem.catch_up()
        before = mem.search("vec", "boat timetable", 3)
        assert any("dense" in h.ranks for h in before)
    with raw(cfg.db_path) as c:
        c.execute(f"DROP TABLE {VEC_TABLE}")
        assert not has_table(c, VEC_TABLE)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        # searching without the table: no error, answers from what is left
        mem.search("vec", "boat timetable", 3)
        mem.cold.repair()
        assert mem.cold.integrity()["vectors"] == len(texts)
        after = mem.search("vec", "boat timetable", 3)
        assert any("dense" in h.ranks for h in after)
        assert after[0].position == before[0].position
        assert [m.text for m in mem.history("vec")] == texts
    record_figure("corruption: dropped vector table: vectors restored by repair", f"{len(texts)} / {len(texts)}",
                  "", "pytest tests/test_reliability_corruption.py")


@pytest.mark.parametrize("table", ["messages_fts", "turns"])
def test_lost_derived_rows_are_rebuilt(tmp_path: Path, embedder: FastEmbedder, table: str) -> None:
    cfg = Config(data_dir=tmp_path / "data")
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        for i in range(4):
            mem.append("derived", {"role": "user", "content": f"derived row {i} zebra"})
    with raw(cfg.db_path) as c:
        c.execute(f"DELETE FROM {table}")
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.cold.repair()
        counts = mem.cold.integrity()
        assert counts["turns"] == counts["fts"] == counts["messages"] == 4
        assert {h.position for h in mem.search("derived", "zebra", 10)} == {0, 1, 2, 3}
