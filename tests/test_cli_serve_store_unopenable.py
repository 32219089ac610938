"""`tiermem serve` on a store that cannot be opened says so in one `error:` line and exits
1, before "serving on", as every other command does. Before, the Memory was opened in the
uvicorn lifespan, after the CLI's error handling: a corrupt file, a schema newer than the
code or an unreachable PostgreSQL printed "tiermem serving on ..." and then a 76-134-line
traceback, exit 3. Now `serve` opens it first and hands it to the app (`hand_over`), whose
lifespan closes it at shutdown: a SIGTERM (which uvicorn re-raises once shut down) still
leaves the database closed, its WAL folded back. Real console script, real files, a real
port with nothing on it for PostgreSQL."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from ports import free_port

from tiermem import Config, Memory
from tiermem.config import DEFAULT_DB_FILENAME

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

TIERMEM = str(Path(sys.executable).with_name("tiermem"))
RUN_TIMEOUT_S = 120  # a failing start loads no model: seconds, not minutes
CORRUPT_BYTES = 100_000
NEWER_SCHEMA_VERSION = 99  # far past any this code knows
CLOSED_PORT = 1  # nothing listens on port 1 of loopback: the connection is refused at once
START_TIMEOUT_S = 120
STOP_TIMEOUT_S = 60


def corrupt(data: Path) -> dict[str, str]:
    data.mkdir()
    (data / DEFAULT_DB_FILENAME).write_bytes(os.urandom(CORRUPT_BYTES))
    return {}


def newer(data: Path) -> dict[str, str]:
    with Memory(Config(data_dir=data), hot=False, background_indexing=False) as mem:
        mem.append("c1", {"role": "user", "content": "hi"})
    with sqlite3.connect(data / DEFAULT_DB_FILENAME) as db:
        db.execute(f"PRAGMA user_version = {NEWER_SCHEMA_VERSION}")
    return {}


def unreachable_postgres(data: Path) -> dict[str, str]:
    return {"TIERMEM_COLD_URL": f"postgresql://u:pw@127.0.0.1:{CLOSED_PORT}/db"}


# (store, what the one line names) -- each way the review found to fail after "serving on"
CASES: list[tuple[Callable[[Path], dict[str, str]], str]] = [
    (corrupt, "not a database"),  # random bytes where the SQLite file is
    (newer, str(NEWER_SCHEMA_VERSION)),  # a schema a newer tiermem wrote
    (unreachable_postgres, "127.0.0.1"),  # cold_url to a port nothing listens on
]


@pytest.mark.parametrize(("make", "named"), CASES, ids=[make.__name__ for make, _ in CASES])
def test_serve_on_a_store_it_cannot_open_is_one_error_line(tmp_path: Path, make: Callable[[Path], dict[str, str]],
                                                           named: str) -> None:
    data = tmp_path / "data"
    env = {**os.environ, **make(data)}
    r = subprocess.run([TIERMEM, "--data-dir", str(data), "serve", "--no-auth", "--port", str(free_port())],
                       capture_output=True, text=True, timeout=RUN_TIMEOUT_S, env=env)
    assert r.returncode == 1, (r.returncode, r.stderr[-2000:])
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr[-2000:]
    assert named.lower() in lines[0].lower(), lines[0]
    assert "serving on" not in r.stderr and r.stdout == ""


def test_a_served_store_is_closed_at_sigterm(tmp_path: Path) -> None:
    """The Memory serve opened is the app's to close: after SIGTERM the database is closed
    (SQLite folds the WAL back and removes it when its last connection closes)."""
    data = tmp_path / "data"
    port = free_port()
    proc = subprocess.Popen([TIERMEM, "--data-dir", str(data), "serve", "--no-auth", "--port", str(port),
                             "--log-level", "warning"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            assert proc.poll() is None, proc.communicate()[1][-2000:]
            try:
                if httpx.get(f"{url}/healthz", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "serve did not answer /healthz"
            time.sleep(0.2)
        r = httpx.post(f"{url}/v1/conversations/c1/messages", json={"role": "user", "content": "kept"}, timeout=60)
        assert r.status_code == 201, r.text
        assert (data / f"{DEFAULT_DB_FILENAME}-wal").exists()  # open: the write sits in the WAL
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=STOP_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "Traceback" not in err, err[-2000:]
    assert not (data / f"{DEFAULT_DB_FILENAME}-wal").exists(), sorted(os.listdir(data))
    with Memory(Config(data_dir=data), hot=False, background_indexing=False) as mem:
        assert [m.text for m in mem.history("c1")] == ["kept"]
