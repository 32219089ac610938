"""What a command cannot write is named as what it is, in one line, exit 1.

Standard output on a full disk (`> /dev/full`) printed a 25-line traceback without
--debug (the write failed again in `_stdout_in_pieces`'s last flush) or blamed the
database ("storage full: the database cannot grow"); an output file on a full disk
(`export -o`, `config --export`) was blamed on the database too, as was a hot tier whose
directory cannot be prepared ("storage is read-only: the database cannot be written"),
and a file that is no database was "DatabaseError: file is not a database", naming no
path. Real console script, real /dev/full, a real immutable directory (chattr +i)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from service_helpers import frozen

from tiermem import Config, Memory

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

TIERMEM = str(Path(sys.executable).with_name("tiermem"))
RUN_TIMEOUT_S = 120
FULL = "/dev/full"  # every write there fails with ENOSPC
NO_SPACE = os.strerror(28)  # "No space left on device"


def run(data: Path, *args: str, stdout: int | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TIERMEM, "--data-dir", str(data), *args], stdout=stdout if stdout is not None
                          else subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=RUN_TIMEOUT_S)


@pytest.fixture
def data(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    with Memory(Config(data_dir=d), hot=False, background_indexing=False) as mem:
        for i in range(3):
            mem.append("c1", {"role": "user", "content": f"turn {i}"})
    return d


# (the command's arguments, whether its stdout is /dev/full, the one error line it prints)
CASES = [
    (["history", "c1", "--json"], True, f"error: standard output: {NO_SPACE}"),  # the review's: a traceback
    (["history", "c1"], True, f"error: standard output: {NO_SPACE}"),  # the table (rich): the database blamed
    (["export", "c1"], True, f"error: standard output: {NO_SPACE}"),  # JSON Lines on stdout
    (["config"], True, f"error: standard output: {NO_SPACE}"),  # the config table: "storage full"
    (["export", "c1", "-o", FULL], False, f"error: cannot write {FULL}: {NO_SPACE}"),  # "storage full"
    (["config", "--export", FULL], False, f"error: cannot write {FULL}: {NO_SPACE}"),  # "storage full"
]


@pytest.mark.parametrize(("args", "to_full", "said"), CASES, ids=[" ".join(a) for a, _, _ in CASES])
def test_output_on_a_full_disk(data: Path, args: list[str], to_full: bool, said: str) -> None:
    if not os.path.exists(FULL):
        pytest.skip(f"no {FULL} here")
    with open(FULL, "w") as full:
        r = run(data, *args, stdout=full.fileno() if to_full else None)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert r.stderr.splitlines() == [said], r.stderr  # one line: no traceback, nothing about the database


def test_hot_tier_directory_not_blamed_on_the_database(data: Path) -> None:
    """The embedded Redis's directory cannot be prepared (immutable): the warning names
    that directory, not "the database cannot be written"; the command answers (exit 0)."""
    redis_dir = data / "redis"
    redis_dir.mkdir(mode=0o700)
    with frozen(redis_dir):
        r = run(data, "context", "c1", "-b", "500", "--json")
    assert r.returncode == 0, r.stderr
    warnings = [line for line in r.stderr.splitlines() if line.startswith("warning: hot tier unavailable")]
    assert len(warnings) == 1 and str(redis_dir) in warnings[0], r.stderr
    assert "database" not in warnings[0] and "storage" not in warnings[0], warnings[0]


# (what the data dir's tiermem.db holds instead of a database)
NOT_A_DATABASE = [
    b"not sqlite at all\n",  # the review's: another program's file
    os.urandom(8192),  # noise, a page's worth
]


@pytest.mark.parametrize("content", NOT_A_DATABASE, ids=["text", "noise"])
def test_a_file_that_is_no_database_is_named(tmp_path: Path, content: bytes) -> None:
    d = tmp_path / "data"
    d.mkdir()
    (d / "tiermem.db").write_bytes(content)
    r = run(d, "history", "c1")
    assert r.returncode == 1, r.stderr
    assert r.stderr.splitlines() == [
        f"error: {d / 'tiermem.db'} cannot be read as a tiermem database (file is not a database): the file is "
        "damaged or is no SQLite database; check --data-dir or data_dir, or restore the file from a backup"], r.stderr
    assert (d / "tiermem.db").read_bytes() == content  # left as it was
