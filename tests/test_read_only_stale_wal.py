"""A database on storage this process cannot write whose -wal holds commits the main file
lacks (a writer killed before it merged them, then a copy without the -shm, or a -shm this
process may not read) is refused, never read stale. SQLite's `mode=ro` cannot open it
there (no -shm can be made), and `immutable=1`, the fallback, reads the main file only:
before the fix `tiermem export` printed the older rows only, exit 0, with a warning. Now
one `error:` line names the -wal and what to do, exit 1, nothing written. A clean database
(no -wal, or one holding no frame) still opens immutable and answers in full.

Real files, a real writer child killed with SIGKILL, the real console script run where
the mode bits stop it (`unprivileged`: setpriv without root's file capabilities)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from unprivileged import as_unprivileged, unwritable

from tiermem import Config, Memory
from tiermem.config import DEFAULT_DB_FILENAME

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

TIERMEM = str(Path(sys.executable).with_name("tiermem"))
RUN_TIMEOUT_S = 120
WRITER_READY_TIMEOUT_S = 120
CONV = "walc"
WAL_HEADER_BYTES = 32  # SQLite's WAL file format: frames follow a 32-byte header
FIRST = "first, merged into the main file"
SECOND = "second, committed to the WAL only"

# The writer appends SECOND and stays open (as a serve would), so the commit sits in the
# -wal; "truncate" then merges it and empties the -wal (a checkpoint that leaves a 0-byte
# file), as a writer killed after a checkpoint leaves it.
WRITER = """
import sqlite3, sys, time
from tiermem import Config, Memory
mem = Memory(Config(data_dir=sys.argv[1]), hot=False, background_indexing=False)
mem.append(sys.argv[2], {"role": "user", "content": sys.argv[3]})
if sys.argv[4] == "truncate":
    side = sqlite3.connect(str(mem.config.db_path))
    assert side.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0
print("ready", flush=True)
time.sleep(600)
"""


def write_then_die(data: Path, checkpoint: str) -> None:
    """A writer that committed SECOND, killed with SIGKILL before it closed."""
    child = subprocess.Popen([sys.executable, "-c", WRITER, str(data), CONV, SECOND, checkpoint],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line.strip() == "ready", (line, child.stderr.read() if child.poll() is not None else "")
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=WRITER_READY_TIMEOUT_S)


def digest(data: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(data.iterdir()) if p.is_file()}


# (how the writer ended, the -shm: "gone" (a copy without it) / "unreadable" (chmod 000),
#  exit status, the rows export shows)
CASES = [
    # the review's: a killed writer, copied without its -shm: the WAL's commit would be skipped
    ("killed", "gone", 1, []),
    # the same WAL with its -shm there but unreadable to this process: mode=ro fails too
    ("killed", "unreadable", 1, []),
    # a writer killed after a TRUNCATE checkpoint: a 0-byte -wal holds nothing unmerged
    ("truncate", "gone", 0, [FIRST, SECOND]),
    # a writer that closed: no -wal at all, the immutable open is right and complete
    ("closed", "gone", 0, [FIRST, SECOND]),
]


@pytest.mark.parametrize(("writer", "shm", "rc", "rows"), CASES,
                         ids=["wal-no-shm", "wal-shm-unreadable", "empty-wal", "no-wal"])
def test_export_on_read_only_storage_never_skips_the_wal(tmp_path: Path, writer: str, shm: str, rc: int,
                                                         rows: list[str]) -> None:
    data = tmp_path / "data"
    with Memory(Config(data_dir=data), hot=False, background_indexing=False) as mem:
        mem.append(CONV, {"role": "user", "content": FIRST})
    db = data / DEFAULT_DB_FILENAME
    wal, shm_path = Path(f"{db}-wal"), Path(f"{db}-shm")
    if writer == "closed":
        with Memory(Config(data_dir=data), hot=False, background_indexing=False) as mem:
            mem.append(CONV, {"role": "user", "content": SECOND})
        assert not wal.exists()
    else:
        write_then_die(data, writer)
        size = wal.stat().st_size
        # the commit is in the -wal (frames past its header), or merged and the -wal emptied
        assert size == 0 if writer == "truncate" else size > WAL_HEADER_BYTES, size
    if shm == "gone":
        shm_path.unlink(missing_ok=True)
    before = digest(data)
    with unwritable(data, unreadable=[shm_path] if shm == "unreadable" else []):
        r = subprocess.run([*as_unprivileged(), TIERMEM, "--data-dir", str(data), "export"], capture_output=True,
                           text=True, timeout=RUN_TIMEOUT_S, env={k: v for k, v in os.environ.items()
                                                                  if not k.startswith("TIERMEM_")})
    assert r.returncode == rc, (r.returncode, r.stdout, r.stderr)
    assert [json.loads(line)["message"]["content"] for line in r.stdout.splitlines()] == rows
    errors = [line for line in r.stderr.splitlines() if line.startswith("error: ")]
    if rc:
        # one line: the -wal named, what it holds, what to do
        assert len(errors) == 1 and "Traceback" not in r.stderr, r.stderr
        assert f"{wal}" in errors[0] and "not yet merged" in errors[0], errors[0]
        assert "where it can be written" in errors[0], errors[0]
    else:
        assert errors == [], r.stderr
    assert digest(data) == before  # nothing written, the -wal kept for the writable open
    # where it can be written, the WAL is merged and every commit is there
    with Memory(Config(data_dir=data), hot=False, background_indexing=False) as mem:
        assert [m.body["content"] for m in mem.history(CONV)] == [FIRST, SECOND]
