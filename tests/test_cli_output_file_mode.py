"""A file a command creates is private (0600) whatever the umask, as everything tiermem
creates is: `export -o` (the conversations themselves) as `config --export` was. Before,
a new `export -o` file got 0666 less the umask (0644 under 022: readable by every user).
A file that was there keeps its own mode (tests/test_export_replaces.py). Real console
script under a real umask."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tiermem import Config, Memory

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

TIERMEM = str(Path(sys.executable).with_name("tiermem"))
RUN_TIMEOUT_S = 120
PRIVATE = 0o600

# (command writing FILE, the umask it runs under)
WRITERS = [
    (["export", "-o", "{out}"], 0o022),  # the review's: was 0644
    (["export", "-o", "{out}"], 0o000),  # was 0666: writable by everyone
    (["config", "--export", "{out}"], 0o022),  # already 0600: the rule both keep
]


@pytest.mark.parametrize(("command", "umask"), WRITERS, ids=["export-022", "export-000", "config-export-022"])
def test_a_new_output_file_is_private(tmp_path: Path, command: list[str], umask: int) -> None:
    data = tmp_path / "data"
    with Memory(Config(data_dir=data), hot=False, background_indexing=False) as mem:
        mem.append("c1", {"role": "user", "content": "a private matter"})
    out = tmp_path / "out.file"
    r = subprocess.run([TIERMEM, "--data-dir", str(data), *[a.replace("{out}", str(out)) for a in command]],
                       capture_output=True, text=True, timeout=RUN_TIMEOUT_S, umask=umask)
    assert r.returncode == 0, r.stderr
    assert oct(stat.S_IMODE(out.stat().st_mode)) == oct(PRIVATE)
    assert out.read_text(encoding="utf-8")
