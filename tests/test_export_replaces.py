"""`tiermem export -o FILE` puts FILE in place only once the export is all written: a
failure part-way (here the real EFBIG of a file size limit, as a full disk would give)
leaves the file that was there, byte for byte, and no temporary beside it. Before (a bug
hunt, 2026-12-06) FILE was truncated first, so a failed export left a partial file where
a good one had been. Real console script, real data dir, real file system."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tiermem.config import Config
from tiermem.memory import Memory
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

TIERMEM = str(Path(sys.executable).with_name("tiermem"))
CONV = "c"
TURNS = 6
TURN_CHARS = 30_000  # an export of ~180 kB
FILE_SIZE_LIMIT_BYTES = 64 * 1024  # the export fails past it (EFBIG); the store is only read
RUN_TIMEOUT_S = 180


@pytest.fixture
def data_dir(tmp_path: Path, embedder: FastEmbedder) -> Path:
    data = tmp_path / "data"
    with Memory(Config(data_dir=data), embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append_many(CONV, [{"role": "user", "content": f"{i} " + "x" * TURN_CHARS} for i in range(TURNS)],
                        namespace="default")
    return data


def export(data_dir: Path, out: Path, limit: int | None = None) -> subprocess.CompletedProcess[str]:
    def limited() -> None:  # in the child: its writes past `limit` fail with EFBIG (Python ignores SIGXFSZ)
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run([TIERMEM, "--data-dir", str(data_dir), "export", "-o", str(out)], capture_output=True,
                          text=True, timeout=RUN_TIMEOUT_S, preexec_fn=limited)


def test_a_failed_export_leaves_the_good_file_in_place(tmp_path: Path, data_dir: Path) -> None:
    out = tmp_path / "out" / "all.jsonl"
    out.parent.mkdir()
    out.write_text('{"an": "earlier export"}\n', encoding="utf-8")
    before = out.read_bytes()
    r = export(data_dir, out, limit=FILE_SIZE_LIMIT_BYTES)
    assert r.returncode == 1 and r.stderr.startswith("error: ") and "Traceback" not in r.stderr, r.stderr
    assert out.read_bytes() == before
    assert os.listdir(out.parent) == ["all.jsonl"]  # the temporary was removed


def test_a_finished_export_replaces_the_file_and_keeps_its_mode(tmp_path: Path, data_dir: Path) -> None:
    out = tmp_path / "all.jsonl"
    out.write_text("old\n", encoding="utf-8")
    out.chmod(0o640)
    r = export(data_dir, out)
    assert r.returncode == 0 and f"exported {TURNS} message(s)" in r.stderr, r.stderr
    assert [json.loads(x)["message"]["content"][:2] for x in out.read_text().splitlines()] == \
        [f"{i} " for i in range(TURNS)]
    assert (out.stat().st_mode & 0o777, sorted(os.listdir(tmp_path))) == (0o640, ["all.jsonl", "data"])


def test_an_export_through_a_link_replaces_the_file_it_names(tmp_path: Path, data_dir: Path) -> None:
    real = tmp_path / "real.jsonl"
    real.write_text("old\n", encoding="utf-8")
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    assert export(data_dir, link).returncode == 0
    assert link.is_symlink() and len(real.read_text().splitlines()) == TURNS
