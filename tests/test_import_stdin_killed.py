"""`tiermem import -` killed, even by SIGKILL, leaves no copy of its input behind. The
input is copied to a temporary file for the import's two readings (in the data dir when
it exists); before (a correctness review of the streaming import, 2026-12-06) that copy
had a name (tiermem-import-*.jsonl) until the import ended, so a SIGTERM or SIGKILL
(a service manager, timeout(1), the OOM killer) left a full plaintext copy of the input
in the data dir forever, out of reach of erasure. Now it has no name from its creation
(O_TMPFILE, else unlinked at once) and is read through its descriptor. A real console
script, killed while it copies its input and while it writes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tiermem.evals import conversations

pytestmark = [pytest.mark.usefixtures("clean_env"),  # no TIERMEM_* setting of the runner leaks in
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/<pid>/fd")]

TIERMEM = str(Path(sys.executable).with_name("tiermem"))
SPOOL_PREFIX: str = getattr(conversations, "SPOOL_PREFIX", "tiermem-import-")
LINES = 40_000  # enough that the import is still writing when it is killed
WAIT_S = 60.0  # for the child to reach the step it is killed in
POLL_S = 0.01
CARD = "my card is 4111 1111 1111 1111"  # what the copy must not keep


def line(i: int) -> str:
    return json.dumps({"conversation_id": "secret", "role": "user", "content": f"{CARD} #{i}"}) + "\n"


def open_files(pid: int) -> list[str]:
    out = []
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            out.append(os.readlink(fd))
        except OSError:  # closed meanwhile
            continue
    return out


def copying(data: Path) -> Callable[[int], bool]:
    """The child holds a file of the data dir other than its database: the copy."""
    return lambda pid: any(f.startswith(f"{data}/") and "tiermem.db" not in f for f in open_files(pid))


def writing(data: Path) -> Callable[[int], bool]:
    """The child has opened the database (after the file's first reading): it writes."""
    return lambda pid: any(f == str(data / "tiermem.db") for f in open_files(pid))


# (id, the step the child is killed in, whether its input is closed first)
STEPS = [("while_copying", copying, False), ("while_writing", writing, True)]


@pytest.mark.parametrize(("step", "close_input"), [s[1:] for s in STEPS], ids=[s[0] for s in STEPS])
def test_sigkill_leaves_no_copy_of_the_input(tmp_path: Path, step: Callable[[Path], Callable[[int], bool]],
                                            close_input: bool) -> None:
    data, tmp = tmp_path / "data", tmp_path / "tmp"
    data.mkdir()
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}  # where the copy goes without a data dir: watched too
    child = subprocess.Popen([TIERMEM, "--data-dir", str(data), "import", "-"], stdin=subprocess.PIPE,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    assert child.stdin is not None
    try:
        child.stdin.write("".join(line(i) for i in range(LINES)).encode())
        child.stdin.flush()
        if close_input:
            child.stdin.close()
        reached = step(data)
        deadline = time.monotonic() + WAIT_S
        while not reached(child.pid):
            assert child.poll() is None, "the import ended before it could be killed"
            assert time.monotonic() < deadline, "the import never reached the step"
            time.sleep(POLL_S)
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=WAIT_S) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    left = [p.name for d in (data, tmp) for p in d.iterdir() if p.name.startswith(SPOOL_PREFIX)]
    assert left == []
