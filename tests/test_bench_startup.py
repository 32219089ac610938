"""The start-up benchmark runs end to end (small: one run, a few cases, no baseline)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from cold_helpers import child_env


def test_bench_startup_smoke(tmp_path: Path) -> None:
    out_json = tmp_path / "startup.json"
    cmd = [sys.executable, "-m", "tiermem.evals.bench_startup", "--runs", "1", "--turns", "20", "--no-baseline",
           "--skip-inprocess", "--only", "append (plain)", "--only", "import", "--json", str(out_json)]
    out = subprocess.run(cmd, env=child_env(), capture_output=True, text=True, timeout=300,
                         cwd=Path(__file__).resolve().parents[1])
    assert out.returncode == 0, out.stderr[-3000:]
    assert "| append (plain) |" in out.stdout and "| import tiermem |" in out.stdout
    report = json.loads(out_json.read_text())
    row = report["processes"]["append (plain)"]["new"]
    assert row["wall"]["n"] == 1 and row["wall"]["p50"] > 0 and row["rss"]["p50"] > 10  # MiB
    assert report["processes"]["-X importtime: tiermem"]["new"]["wall"]["p50"] > 0
    assert "baseline" not in report["processes"]["append (plain)"]
