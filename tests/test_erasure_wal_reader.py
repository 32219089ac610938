"""An erasure while another process holds a read transaction on the SQLite file cannot
truncate the WAL then: the report says so (`wal_truncated` False) and the store's next
write, once the reader is done, truncates it, so the erased text leaves the files. On the
code before (an audit, 2026-12-03) the report looked complete and the text stayed in the
WAL after the reader ended and after a later append."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from wal_reader import read_transaction

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder

CANARY = "zq7canary4471kumquat"
# scanning the files from this process would close a descriptor of the open database and
# drop this process's POSIX locks on it, so another process reads them
SCAN = r"""
import sys
from pathlib import Path
d, needle = Path(sys.argv[1]), sys.argv[2].encode()
print(",".join(sorted(p.name for p in d.iterdir() if p.is_file() and needle in p.read_bytes())))
"""


def _files_with(data_dir: Path, needle: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", SCAN, str(data_dir), needle], capture_output=True, text=True,
                         check=True).stdout.strip()
    return out.split(",") if out else []


def test_an_erasure_under_a_reader_says_so_and_the_next_write_scrubs_the_wal(
        tmp_path: Path, embedder: FastEmbedder) -> None:
    cfg = Config(data_dir=tmp_path / "data")
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append_many("secret", [{"role": "user", "content": f"x{i} {CANARY}"} for i in range(30)])
        mem.append("other", {"role": "user", "content": "another thread"})
        with read_transaction(cfg.db_path, "SELECT COUNT(*) FROM messages") as read:
            assert read == "31"
            report = mem.delete_conversation("secret")
            assert report.messages == 30
            assert report.wal_truncated is False and report.scrubbed is False
            assert report.to_json()["wal_truncated"] is False
        assert mem.history("other")
        mem.append("other", {"role": "user", "content": "an ordinary write"})
        assert _files_with(cfg.data_dir, CANARY) == []


def test_an_erasure_without_a_reader_truncates_at_once(tmp_path: Path,
                                                       embedder: FastEmbedder) -> None:
    cfg = Config(data_dir=tmp_path / "data")
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append_many("secret", [{"role": "user", "content": f"x{i} {CANARY}"} for i in range(30)])
        done = mem.delete_conversation("secret")
        assert done.wal_truncated is True and done.scrubbed is True
        assert _files_with(cfg.data_dir, CANARY) == []
