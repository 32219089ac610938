"""A data dir this test's child processes cannot write, by the mode bits, also when the
tests run as root: the children then run under `setpriv` without the capabilities that let
root pass the mode bits (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER), so a file
chmod 000 is unreadable to them and a directory chmod 555 refuses new files, as for any
user. Unlike `service_helpers.frozen` (chattr +i), this also makes one file unreadable
(a -shm the process may not read)."""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

NO_WRITE_BITS = ~0o222
NO_ACCESS = 0o000


def as_unprivileged() -> list[str]:
    """The command prefix that runs a child as this user without root's file capabilities
    (nothing when not root: the mode bits already apply)."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: cannot run a child that the mode bits stop")
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--inh-caps=-all"]


@contextmanager
def unwritable(root: Path, *, unreadable: Iterable[Path] = ()) -> Iterator[None]:
    """`root` and everything in it without write bits (and `unreadable` without any bit)
    until the block ends; the modes are put back after."""
    paths = [root, *root.rglob("*")]
    modes = {p: stat.S_IMODE(p.stat().st_mode) for p in paths}
    closed = set(unreadable)
    for p in sorted(paths, key=lambda q: -len(q.parts)):  # files before their directories
        os.chmod(p, NO_ACCESS if p in closed else modes[p] & NO_WRITE_BITS)
    try:
        yield
    finally:
        for p in sorted(paths, key=lambda q: len(q.parts)):
            os.chmod(p, modes[p])
