"""`tiermem serve` names what it cannot use as the other commands do (0d40f04): a hot tier
whose directory cannot be prepared is a warning naming that directory, not "the
database cannot be written", and a data dir whose tiermem.db is no database (or a
damaged one) is one `error:` line naming the file, exit 1, before "serving on".

Before: serve's warning said "storage is read-only: the database cannot be written"
for the embedded Redis's refused launch.lock, and a file that is no database was
"error: DatabaseError: file is not a database", naming no path. Real console script, a
real immutable directory (chattr +i, `frozen`), real files, a real port."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from ports import free_port
from service_helpers import frozen

from tiermem import Config, Memory
from tiermem.config import DEFAULT_DB_FILENAME
from tiermem.tiers.redis_server import EmbeddedRedis

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

TIERMEM = str(Path(sys.executable).with_name("tiermem"))
RUN_TIMEOUT_S = 120  # a failing start loads no model: seconds, not minutes
START_TIMEOUT_S = 120
STOP_TIMEOUT_S = 60
SERVING = "tiermem serving on "  # the line serve prints once the store is open
HOT_WARNING = "warning: hot tier unavailable"
DAMAGED_PAGE_OFFSET = 100  # inside the header of page 1: SQLite's own fields, past the magic string
DAMAGED_BYTES = 4000  # the rest of page 1 (4096-byte pages): the schema's root page is garbage


def serve(data: Path) -> list[str]:
    """Start `serve --no-auth` on `data` and return its stderr lines up to "serving on"
    (then stop it with SIGTERM), or all of them when it exits first."""
    port = free_port()
    proc = subprocess.Popen([TIERMEM, "--data-dir", str(data), "serve", "--no-auth", "--port", str(port),
                             "--log-level", "warning"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:  # it exited
                proc.wait(timeout=STOP_TIMEOUT_S)
                return lines
            lines.append(line.rstrip("\n"))
            if line.startswith(SERVING):
                proc.send_signal(signal.SIGTERM)
                proc.communicate(timeout=STOP_TIMEOUT_S)
                return lines
        pytest.fail(f"serve neither served nor exited: {lines}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return lines


def test_hot_tier_directory_named_not_the_database(tmp_path: Path) -> None:
    """The embedded Redis's directory is immutable: serve starts, and its one warning names
    that directory, in the file's words."""
    data = tmp_path / "data"
    with Memory(Config(data_dir=data), hot=False, background_indexing=False) as mem:
        mem.append("c1", {"role": "user", "content": "hello"})
    redis_dir = data / "redis"
    redis_dir.mkdir(mode=0o700)
    try:
        with frozen(redis_dir):
            lines = serve(data)
    finally:
        EmbeddedRedis(data).stop()
    assert any(line.startswith(SERVING) for line in lines), lines
    warnings = [line for line in lines if line.startswith(HOT_WARNING)]
    assert len(warnings) == 1 and str(redis_dir) in warnings[0], lines
    # the review's: "storage is read-only: the database cannot be written"
    assert "database" not in warnings[0] and "storage" not in warnings[0], warnings[0]


def not_sqlite(db: Path) -> None:
    db.write_bytes(b"not sqlite at all\n")  # another program's file


def noise(db: Path) -> None:
    db.write_bytes(os.urandom(8192))  # two pages of random bytes


def damaged_header(db: Path) -> None:
    """A real tiermem database whose first page after SQLite's magic string is garbage."""
    with Memory(Config(data_dir=db.parent), hot=False, background_indexing=False) as mem:
        mem.append("c1", {"role": "user", "content": "hello"})
    with db.open("r+b") as fh:
        fh.seek(DAMAGED_PAGE_OFFSET)
        fh.write(b"\xff" * DAMAGED_BYTES)


# (what the data dir's tiermem.db holds instead of a sound database)
DAMAGE: list[Callable[[Path], None]] = [not_sqlite, noise, damaged_header]


@pytest.mark.parametrize("make", DAMAGE, ids=[f.__name__ for f in DAMAGE])
def test_a_file_that_cannot_be_read_is_named(tmp_path: Path, make: Callable[[Path], None]) -> None:
    data = tmp_path / "data"
    data.mkdir()
    db = data / DEFAULT_DB_FILENAME
    make(db)
    content = db.read_bytes()
    r = subprocess.run([TIERMEM, "--data-dir", str(data), "serve", "--no-auth", "--port", str(free_port())],
                       capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert r.returncode == 1, (r.returncode, r.stderr[-2000:])
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr[-2000:]  # no traceback, no "serving on"
    assert lines[0].startswith(f"error: {db} cannot be read as a tiermem database ("), lines[0]
    assert lines[0].endswith("): the file is damaged or is no SQLite database; check --data-dir or data_dir, "
                             "or restore the file from a backup"), lines[0]
    assert db.read_bytes() == content  # left as it was
