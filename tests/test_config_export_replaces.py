"""`tiermem config --export FILE` puts FILE in place only once the export is all written,
as `export -o` does (the one helper, `tiermem.cli._replacing`): a failure part-way (here
the real EFBIG of a file size limit, as a full disk would give) leaves the file that was
there, byte for byte, and no temporary beside it. Before, FILE was truncated first, so a
failed export left a partial config where a good one had been. The file is still 0600 (it
may hold bearer tokens), also when it replaces a wider one. Real console script, real
file system."""

from __future__ import annotations

import os
import resource
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tiermem.config import Config

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

TIERMEM = str(Path(sys.executable).with_name("tiermem"))
FILE_SIZE_LIMIT_BYTES = 512  # the export (a few kB) fails past it with EFBIG
EARLIER = "# an earlier export\nhot_budget_tokens = 3000\n"  # under the limit: written before it is set
RUN_TIMEOUT_S = 120


def export(tmp_path: Path, out: Path, limit: int | None = None) -> subprocess.CompletedProcess[str]:
    def limited() -> None:  # in the child: its writes past `limit` fail with EFBIG (Python ignores SIGXFSZ)
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run([TIERMEM, "--data-dir", str(tmp_path / "data"), "config", "--export", str(out)],
                          capture_output=True, text=True, timeout=RUN_TIMEOUT_S, preexec_fn=limited)


@pytest.mark.parametrize("name", [
    "tiermem.toml",  # TOML
    "tiermem.json",  # JSON, by the name
])
def test_a_failed_config_export_leaves_the_good_file_in_place(tmp_path: Path, name: str) -> None:
    out = tmp_path / "out" / name
    out.parent.mkdir()
    out.write_text(EARLIER, encoding="utf-8")
    out.chmod(0o600)
    r = export(tmp_path, out, limit=FILE_SIZE_LIMIT_BYTES)
    assert r.returncode == 1 and r.stderr.startswith("error: ") and "Traceback" not in r.stderr, r.stderr
    assert out.read_text(encoding="utf-8") == EARLIER
    assert os.listdir(out.parent) == [name]  # the temporary was removed


def test_a_finished_config_export_replaces_a_wider_file_as_private(tmp_path: Path) -> None:
    out = tmp_path / "out" / "tiermem.toml"
    out.parent.mkdir()
    out.write_text(EARLIER, encoding="utf-8")
    out.chmod(0o644)
    r = export(tmp_path, out)
    assert r.returncode == 0 and r.stderr.startswith(f"wrote {out}"), r.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o600  # it may hold bearer tokens
    assert Config.load(out).data_dir == tmp_path / "data"
    assert os.listdir(out.parent) == ["tiermem.toml"]
