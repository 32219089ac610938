"""A config file that exists but is not a regular file (a pipe, `tiermem --config
<(envsubst < t.toml)`, or a directory named by TIERMEM_CONFIG) is refused saying so. Before,
the message said the file did not exist, which `ls` contradicted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tiermem import Config

pytestmark = pytest.mark.usefixtures("clean_env")


def test_a_pipe_is_not_said_not_to_exist(tmp_path: Path) -> None:
    # a real process reading a real pipe, as a shell's process substitution gives it
    read_end, write_end = os.pipe()
    os.write(write_end, b"hot_budget_tokens = 3000\n")
    os.close(write_end)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERMEM_")}
    res = subprocess.run([sys.executable, "-m", "tiermem.cli", "--data-dir", str(tmp_path), "--config",
                          f"/dev/fd/{read_end}", "config"], pass_fds=(read_end,), env=env,
                         capture_output=True, text=True, timeout=120)
    os.close(read_end)
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
    assert "not a regular file" in res.stderr and "does not exist" not in res.stderr, res.stderr


def test_a_directory_named_by_the_env_is_not_said_not_to_exist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIERMEM_CONFIG", str(tmp_path))
    with pytest.raises(ValueError, match="not a regular file"):
        Config(data_dir=tmp_path)


def test_a_missing_file_still_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIERMEM_CONFIG", str(tmp_path / "nope.toml"))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        Config(data_dir=tmp_path)
