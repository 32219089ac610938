"""The PostgreSQL benchmark's wiring (evals.bench_postgres, `make bench-postgres`), without
measuring again: the saved run in docs/ renders to the committed table, its rows carry
the issue's targets with SQLite of the same run beside them, `make bench` picks the rows
up, and the disk-floor probe measures real flushes. (The run itself takes minutes; the
figures are the lead's to re-measure.)"""

from __future__ import annotations

import json
from pathlib import Path

from tiermem.evals import bench, bench_postgres

ROOT = Path(__file__).resolve().parent.parent
SAVED = ROOT / "docs" / "bench_postgres.json"
SAVED_SCALE = ROOT / "docs" / "bench_scale_postgres.json"


def test_the_committed_table_is_what_the_saved_run_renders() -> None:
    saved = json.loads(SAVED.read_text())
    assert SAVED.with_suffix(".md").read_text() == bench_postgres.render_markdown(saved)


def test_rows_carry_the_targets_and_sqlite_of_the_same_run() -> None:
    saved = json.loads(SAVED.read_text())
    rows = bench_postgres.rows(saved)
    by_op = {r["operation"].split(" (")[0].split(",")[0]: r for r in rows}
    append = next(r for r in rows if r["operation"].startswith("append, one message, synchronous_commit=on"))
    assert append["p50"] == saved["append_ms"]["postgres"]["p50"]
    assert append["baseline_p50"] == saved["append_ms"]["sqlite"]["p50"]
    assert append["target"] == "p50 <= 2 ms" and append["ok"] == (append["p50"] <= 2.0)
    assert f"({saved['append_round_trips']} round trip(s))" in append["operation"]
    ctx = next(r for r in rows if r["operation"].startswith("context(), budget"))
    assert (ctx["p50"], ctx["p99"]) == (saved["context_ms"]["postgres"]["p50"], saved["context_ms"]["postgres"]["p99"])
    assert "load" in ctx["operation"]  # the load average travels with the figure
    assert {"bulk ingest", "hybrid search", "disk floor: write + fdatasync of one 8 KiB WAL page"} <= set(by_op)
    writers = [r for r in rows if "writer process" in r["operation"] and r["unit"] == "/s"]
    assert [r["p50"] for r in writers] == [saved["writers"][f"postgres_{n}"]["appends_per_s"] for n in (1, 4)]


def test_make_bench_adds_the_saved_postgres_rows(tmp_path: Path) -> None:
    rows, notes = bench.postgres_rows_from(SAVED, SAVED_SCALE)
    assert len(rows) == len(bench_postgres.rows(json.loads(SAVED.read_text()))) + 3  # + the 3 one-conversation rows
    assert all(r["bench"] == "postgres" for r in rows)
    assert len(notes) == 2 and all("load average" in n for n in notes)
    assert bench.postgres_rows_from(tmp_path / "none.json", tmp_path / "none2.json") == ([], [])


def test_the_disk_floor_probe_flushes_a_real_file(tmp_path: Path) -> None:
    floor = bench_postgres.fsync_floor(tmp_path, n=20)
    assert set(floor) == {"fdatasync", "fsync", "open_datasync"}
    assert all(d["n"] == 20 and 0 < d["p50"] <= d["p99"] for d in floor.values())
    assert list(tmp_path.iterdir()) == []  # the probe file is removed
