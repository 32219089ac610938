"""`tiermem index` on storage that cannot be written fails as every write there does: one
line `error: storage is read-only ...`, exit 1, when turns wait for embeddings it cannot
store. Before, it printed "embedded 0 turn(s) ... 2 pending" and exited 0, as if done.
With nothing pending there is nothing to write, and it still answers 0. Read-only for
real (`frozen`: chattr +i as root, else the mode bits); real console script."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from service_helpers import frozen

from tiermem import Config, Memory

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

TIERMEM = str(Path(sys.executable).with_name("tiermem"))
RUN_TIMEOUT_S = 120


# (messages appended without embedding them, the exit status, what stderr holds)
CASES = [
    (2, 1, "storage is read-only"),  # the review's: two turns pending, none can be stored
    (0, 0, ""),  # nothing pending: nothing to write, nothing failed
]


@pytest.mark.parametrize(("pending", "rc", "said"), CASES, ids=["pending", "nothing-pending"])
def test_index_on_read_only_storage(tmp_path: Path, pending: int, rc: int, said: str) -> None:
    data = tmp_path / "data"
    with Memory(Config(data_dir=data), hot=False, background_indexing=False) as mem:
        for i in range(pending):
            mem.append("c1", {"role": "user", "content": f"turn {i}"})
        assert mem.cold.pending_embeddings() == pending
    with frozen(data):
        r = subprocess.run([TIERMEM, "--data-dir", str(data), "index", "--json"], capture_output=True, text=True,
                           timeout=RUN_TIMEOUT_S)
    assert r.returncode == rc, (r.returncode, r.stdout, r.stderr)
    errors = [line for line in r.stderr.splitlines() if line.startswith("error: ")]
    if rc:
        assert len(errors) == 1 and said in errors[0] and f"{pending} turn(s)" in errors[0], r.stderr
        assert "Traceback" not in r.stderr and r.stdout == ""
    else:
        assert errors == [] and json.loads(r.stdout)["pending"] == 0, r.stderr
    with Memory(Config(data_dir=data), hot=False, background_indexing=False) as mem:
        assert mem.cold.pending_embeddings() == pending  # nothing was written either way
