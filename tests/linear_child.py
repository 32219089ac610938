"""Run a piece of code in a child interpreter that must finish in time, for the tests of
linear-time reading (test_classify_linear, test_slots_linear, test_statements_linear).

Nothing is timed: an input that is read in linear time finishes in seconds, one read in
n squared in many minutes, so a generous timeout tells them apart on a loaded machine."""

from __future__ import annotations

import subprocess
import sys

import pytest

CHILD_TIMEOUT_S = 120  # generous for a loaded machine; n squared needs hundreds of seconds per input


def finishes(code: str, too_slow: str, timeout_s: float = CHILD_TIMEOUT_S) -> None:
    """Run `code` (which prints "ok" when done) in a child; fail naming `too_slow` if it
    outlives `timeout_s`, or if it fails or prints anything else."""
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{too_slow} took over {timeout_s:g} s")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
