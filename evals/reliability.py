"""Run the reliability suite and print its figures as a table.

    python -m tiermem.evals.reliability            # the bounded suite (what `make test` runs)
    python -m tiermem.evals.reliability --soak     # the long runs (TIERMEM_SOAK=1, `-m soak`)

Each test in tests/test_reliability_*.py records what it measured (appends/s, context
p50/p99 under load, kills survived, Redis recovery time, ...) through
`reliability_helpers.record_figure`; this runner points TIERMEM_RELIABILITY_OUT at a temp
file, runs pytest, and prints one row per figure with the command that produced it.
The exit status is pytest's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FILES = ["load", "crash", "redis", "disk", "corruption", "hostile", "tenancy"]


def run(soak: bool, only: list[str] | None = None, extra: list[str] | None = None) -> tuple[int, list[dict[str, Any]]]:
    files = [f"tests/test_reliability_{name}.py" for name in (only or FILES)]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "figures.jsonl"
        env = dict(os.environ, TIERMEM_RELIABILITY_OUT=str(out))
        cmd = [sys.executable, "-m", "pytest", *files, "-q", "-p", "no:cacheprovider"]
        if soak:
            env["TIERMEM_SOAK"] = "1"
            cmd += ["-m", "soak"]
        cmd += extra or []
        rc = subprocess.run(cmd, cwd=ROOT, env=env, check=False).returncode
        rows = [json.loads(line) for line in out.read_text().splitlines() if line.strip()] if out.exists() else []
    return rc, rows


def table(rows: list[dict[str, Any]]) -> str:
    """A Markdown table: figure | value | command."""
    lines = ["| figure | value | command |", "|---|---|---|"]
    for r in rows:
        value = f"{r['value']} {r.get('unit', '')}".strip()
        lines.append(f"| {r['name']} | {value} | `{r.get('command', '')}` |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tiermem.evals.reliability", description=__doc__.split("\n\n")[0])
    ap.add_argument("--soak", action="store_true", help="the long runs (20 kills, 60 s of load, ...)")
    ap.add_argument("--only", action="append", choices=FILES, help="run only these parts (repeatable)")
    args, extra = ap.parse_known_args(argv)
    rc, rows = run(args.soak, args.only, extra)
    print()
    print(table(rows) if rows else "(no figures recorded)")
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
