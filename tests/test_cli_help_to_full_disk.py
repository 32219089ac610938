"""`tiermem --help` / `--version` into a full device (`> /dev/full`) end as a command's
output does there: one line `error: standard output: ...`, exit 1, no traceback. They
print while the arguments are parsed, before the command's output handling: the OSError
was a traceback (review r_cli 6). Real console script, stdout on /dev/full."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.usefixtures("clean_env"),
              pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")]

TIERMEM = str(Path(sys.executable).with_name("tiermem"))
RUN_TIMEOUT_S = 60


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["history", "--help"]],
                         ids=["help", "version", "command-help"])
def test_help_into_a_full_device_is_one_line(tmp_path: Path, args: list[str]) -> None:
    with open("/dev/full", "w") as full:
        r = subprocess.run([TIERMEM, "--data-dir", str(tmp_path / "d"), *args], stdout=full, stderr=subprocess.PIPE,
                           text=True, timeout=RUN_TIMEOUT_S)
    assert r.returncode == 1, r.stderr
    assert r.stderr.strip() == "error: standard output: No space left on device", r.stderr
