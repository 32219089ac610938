"""A tiermem.db that opens but whose later pages were overwritten since (a disk or a copy
gone wrong): the read that meets them says which file is damaged, in one `error:` line,
exit 1. Before: "error: DatabaseError: database disk image is malformed", naming no file
(the open-time check of 0d40f04 names it only when the damage is met while opening).
Real console script, a real SQLite file with its second half overwritten."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from tiermem import Config, Memory
from tiermem.config import DEFAULT_DB_FILENAME

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

TIERMEM = str(Path(sys.executable).with_name("tiermem"))
RUN_TIMEOUT_S = 120
TURNS = 300
TURN_CHARS = 400  # 300 turns of 400 characters: ~150 pages, the messages' past the schema's
SEED = 29  # the garbage is the same on every run
MALFORMED = "database disk image is malformed"  # SQLite's words for SQLITE_CORRUPT


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """A data dir whose database opens, with its second half garbage."""
    d = tmp_path / "data"
    with Memory(Config(data_dir=d), hot=False, background_indexing=False) as mem:
        mem.append_many("c1", [{"role": "user", "content": f"turn {i} " + "x" * TURN_CHARS} for i in range(TURNS)])
    db = d / DEFAULT_DB_FILENAME
    size = db.stat().st_size
    with db.open("r+b") as fh:
        fh.seek(size // 2)
        fh.write(random.Random(SEED).randbytes(size - size // 2))
    return d


# (the command's arguments: each reads the conversation's messages after the store opened)
CASES = [
    ["history", "c1"],  # the review's: the table
    ["history", "c1", "--json"],  # the same rows as JSON
    ["export", "c1"],  # JSON Lines on stdout
]


@pytest.mark.parametrize("args", CASES, ids=[" ".join(a) for a in CASES])
def test_damage_met_mid_read_names_the_file(data: Path, args: list[str]) -> None:
    db = data / DEFAULT_DB_FILENAME
    content = db.read_bytes()
    r = subprocess.run([TIERMEM, "--data-dir", str(data), *args], capture_output=True, text=True,
                       timeout=RUN_TIMEOUT_S)
    assert r.returncode == 1, (r.returncode, r.stderr[-2000:])
    assert r.stderr.splitlines() == [
        f"error: {db} is damaged ({MALFORMED}): it opened, but part of it cannot be read; restore the file "
        "from a backup"], r.stderr[-2000:]
    assert db.read_bytes() == content  # left as it was
