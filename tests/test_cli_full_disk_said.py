"""A full disk is said as a full disk, naming where, and a command that only reads is
never told that its write was rolled back.

On a disk with nothing free SQLite fails opening a WAL database (growing its -shm) with
SQLITE_IOERR, not SQLITE_FULL: every command, `history` included, said "storage is failing
(disk I/O error): the write was rolled back; retry later" (tiers.files storage_problem,
given the database's path now, asks the disk how much is free). The disk is a real tmpfs
of the test's own (root only: skipped otherwise, with the reason), filled to the last byte.
Redis is a port nobody listens on: the hot tier degrades and writes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from ports import free_port
from tmpfs_helpers import FILLER, fill, mounted_tmpfs

from tiermem.cli import cli as cli_group

TMPFS_SIZE = "4m"  # room for an empty store (~300 KiB) and its sidecars
FULL = "error: storage full: the disk holding {data} is full"
ROLLED_BACK = "rolled back"
WRITTEN = "written"  # "nothing was written", "stay written": a write's words


@pytest.fixture
def data(tmp_path: Path) -> Iterator[Path]:
    """A data dir holding one message on a tmpfs of its own, then filled to the last byte."""
    with mounted_tmpfs(tmp_path / "mnt", TMPFS_SIZE) as mnt:
        d = mnt / "data"
        res = run(d, "append", "c", "--role", "user", "--content", "first")
        assert res.exit_code == 0, res.output
        fill(mnt)
        yield d


def run(data: Path, *args: str) -> Result:
    return CliRunner().invoke(cli_group, ["--data-dir", str(data), *args],
                              env={"TIERMEM_REDIS_URL": f"redis://127.0.0.1:{free_port()}"})


# (command line, whether it writes, what it says of what it left)
COMMANDS = [
    (["history", "c"], False, "free space on that disk and run it again"),  # was "the write was rolled back"
    (["conversations"], False, "free space on that disk and run it again"),  # a read: nothing of a write
    (["export"], False, "free space on that disk and run it again"),  # to stdout: the store's disk is full
    (["search", "first", "-c", "c"], False, "free space on that disk and run it again"),  # a read
    (["append", "c", "--role", "user", "--content", "more"], True, "nothing was written"),  # one transaction
    (["delete", "c"], True, "the command is incomplete"),  # several transactions: those before stay
]


@pytest.mark.parametrize(("args", "writes", "says"), COMMANDS)
def test_a_full_disk_is_said_as_full(data: Path, args: list[str], writes: bool, says: str) -> None:
    res = run(data, *args)
    assert res.exit_code == 1, res.output
    error = res.stderr.strip().splitlines()[-1]
    assert error.startswith(FULL.format(data=data)), error
    assert says in error, error
    if not writes:
        assert ROLLED_BACK not in error and WRITTEN not in error, error
    # and with room again the store reads as before: nothing was lost
    (data.parent / FILLER).unlink()
    res = run(data, "history", "c", "--json")
    assert res.exit_code == 0 and '"first"' in res.stdout, res.output
