"""`tiermem serve` on a port already in use fails at once with exit code 1 and the port
named, before loading anything (it used to print "serving on ...", load for seconds, and
exit with code 3)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from tiermem.cli import cli

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in


def test_port_in_use_is_named_with_exit_code_1(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        r = CliRunner().invoke(cli, ["--data-dir", str(tmp_path / "d"), "serve", "--host", "127.0.0.1",
                                     "--port", str(port), "--no-auth"])
    assert r.exit_code == 1, r.output
    assert f"port {port}" in r.stderr and "already in use" in r.stderr
    assert "serving on" not in r.output
    assert not (tmp_path / "d").exists()  # nothing was opened: the check comes first
