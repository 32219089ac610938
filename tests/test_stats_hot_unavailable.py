"""`tiermem stats --json` reports the hot tier unhealthy, never drops it, when the embedded
Redis cannot start (a read-only data dir): `{"healthy": false, "backend": "embedded",
"last_error": ...}`, the shape an unreachable external Redis gives, so a monitor reading
`hot.healthy` finds false instead of a KeyError. Before, the `hot` key was missing.
A namespace's stats carry no `last_error`, as for the external Redis.

Real console script: under setpriv without root's DAC capabilities (`unprivileged`) on a
chmod a-w data dir; for the external Redis, a loopback port nothing listens on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from unprivileged import as_unprivileged, unwritable

from tiermem import Config, Memory

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

TIERMEM = str(Path(sys.executable).with_name("tiermem"))
RUN_TIMEOUT_S = 120
CLOSED_REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1 of loopback

# (the case, TIERMEM_REDIS_URL or None, --namespace given, backend, last_error's start: None = absent)
CASES = [
    # the review's: the embedded Redis cannot prepare its directory in a read-only data dir
    ("read-only", None, False, "embedded", "PermissionError"),
    # one namespace's stats: the process-wide error left out, as HotLink.stats does
    ("read-only-namespace", None, True, "embedded", None),
    # the reference shape: an external Redis that refuses the connection (passed before too)
    ("external-down", CLOSED_REDIS_URL, False, "external", "ConnectionError"),
]


@pytest.mark.parametrize(("case", "redis_url", "scoped", "backend", "error"), CASES, ids=[c[0] for c in CASES])
def test_stats_reports_a_hot_tier_that_cannot_start(tmp_path: Path, case: str, redis_url: str | None,
                                                    scoped: bool, backend: str, error: str | None) -> None:
    data = tmp_path / "data"
    with Memory(Config(data_dir=data), hot=False, background_indexing=False) as mem:
        mem.append("c1", {"role": "user", "content": "hello"}, namespace="acme")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERMEM_")}
    if redis_url is not None:
        env["TIERMEM_REDIS_URL"] = redis_url
    args = [TIERMEM, "--data-dir", str(data), *(["--namespace", "acme"] if scoped else []), "stats", "--json"]
    with unwritable(data):
        r = subprocess.run([*as_unprivileged(), *args], capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                           env=env)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    out = json.loads(r.stdout)
    assert out["cold"]["messages"] == 1
    hot = out["hot"]
    assert hot["healthy"] is False and hot["backend"] == backend, hot
    if error is None:
        assert "last_error" not in hot, hot
    else:
        assert hot["last_error"].startswith(error), hot
