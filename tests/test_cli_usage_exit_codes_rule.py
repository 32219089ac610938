"""The README's exit-code rule (0 done, 2 usage, 1 error) for four bad values that exited
1, and delete-namespace's question answered anything but yes.

A bad value on the command line is a usage error naming it, exit 2, before anything is
opened: `serve --host ''` (the config's host check, "invalid configuration", exit 1),
`export bad/id` ("no conversation 'bad/id'", exit 1), `append --role tool --tool-call-id ''`
(the message's check, exit 1) and `import /nonexistent` ("no such file", exit 1; eval's
`--data` naming no file was 2 already). delete-namespace's question: no, Enter or standard
input ending says in one line that nothing was erased, exit 1, and Ctrl-C at it exits 130
as anywhere else; before, each was click's "Aborted!", exit 1.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from tiermem.cli import cli

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

TIERMEM = str(Path(sys.executable).with_name("tiermem"))
USAGE_EXIT = 2
ERROR_EXIT = 1
SIGINT_EXIT = 130  # 128 + SIGINT
PROMPT_END = b"[y/N]: "
RUN_TIMEOUT_S = 60
POLL_S = 0.01
PROMPT_SETTLE_S = 0.5  # without procfs: long after input() began its read

# (the arguments, the parameter the usage error names) -- each exited 1 before
USAGE = [
    (["serve", "--host", ""], "'--host'"),  # the config refused it: "invalid configuration"
    (["serve", "--host", "http://example.com"], "'--host'"),  # a URL, not a host name
    (["export", "bad/id"], "'[CONVERSATIONS]...'"),  # "no conversation 'bad/id'"
    (["append", "c", "--role", "tool", "--tool-call-id", "", "--content", "x"], "'--tool-call-id'"),
    (["import", "{missing}"], "'FILE'"),  # "no such file"
]


@pytest.mark.parametrize(("args", "names"), USAGE)
def test_a_bad_value_is_a_usage_error(tmp_path: Path, args: list[str], names: str) -> None:
    data = tmp_path / "data"
    args = [a.format(missing=tmp_path / "nope.jsonl") for a in args]
    res = CliRunner().invoke(cli, ["--data-dir", str(data), *args])
    assert res.exit_code == USAGE_EXIT, res.output
    assert f"Invalid value for {names}" in res.stderr, res.stderr
    assert not data.exists()  # before anything was opened or created


# (what standard input gives the question, what the one line says) -- nothing is erased
ANSWERS = [
    (b"n\n", "error: not confirmed: nothing was erased"),  # no
    (b"\n", "error: not confirmed: nothing was erased"),  # Enter: the default, no
    (b"", "error: no answer (standard input ended): nothing was erased; pass --yes"),  # EOF
]


@pytest.mark.parametrize(("answer", "says"), ANSWERS)
def test_delete_namespace_not_confirmed(tmp_path: Path, answer: bytes, says: str) -> None:
    res = CliRunner().invoke(cli, ["--data-dir", str(tmp_path / "data"), "delete-namespace", "default"],
                             input=answer)
    assert res.exit_code == ERROR_EXIT, res.output
    assert res.stderr.strip().splitlines()[-1].startswith(says), res.stderr
    assert "Aborted" not in res.output


def _blocked_reading(pid: int) -> None:
    """Wait until the process's main thread blocks reading standard input. A SIGINT that
    comes after the question is written but before the read begins (inside the C of
    input()) is not acted on until the read ends (CPython checks signals between bytecodes
    and on EINTR): it would hang the test, as it would not a person, who is slower."""
    wchan = Path(f"/proc/{pid}/task/{pid}/wchan")
    if not wchan.exists():  # no procfs: the best that can be done
        time.sleep(PROMPT_SETTLE_S)
        return
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while "pipe_read" not in wchan.read_text() and time.monotonic() < deadline:
        time.sleep(POLL_S)


def test_ctrl_c_at_the_question_exits_130(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERMEM_")}
    proc = subprocess.Popen([TIERMEM, "--data-dir", str(tmp_path / "data"), "delete-namespace", "default"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        assert proc.stdout is not None
        seen = b""
        while not seen.endswith(PROMPT_END):  # the question is asked: the process waits on stdin
            byte = proc.stdout.read(1)
            assert byte, seen
            seen += byte
        _blocked_reading(proc.pid)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=RUN_TIMEOUT_S)  # stdin left open: communicate() would close it, an EOF
        assert proc.stderr is not None
        err = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == SIGINT_EXIT, err
    assert err.decode().strip().splitlines()[-1] == "error: interrupted at the question: nothing was erased", err
