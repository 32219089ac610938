"""The ingest benchmark runs end to end on a small file and checks what it claims: every
turn embedded, and the same supersession in both modes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cold_helpers import child_env


# extra arguments, and the summary line they add
@pytest.mark.parametrize(("extra", "row"), [
    ([], None),  # the default baseline: the embedder before the bulk path
    # the same embedder with the catch-up unpipelined, and the idle-machine estimate
    (["--baseline", "serial", "--idle-estimate"], "idle_equivalent_turns_per_s"),
    # the new mode as the two steps (import, then the catch-up) instead of overlapped
    (["--new", "sequential", "--baseline", "serial"], None),
])
def test_bench_ingest_smoke(tmp_path: Path, extra: list[str], row: str | None) -> None:
    data = tmp_path / "convs.jsonl"
    lines = [{"conversation_id": "c1", "role": "user", "content": "Seat preference: aisle seat, every time."}]
    lines += [{"conversation_id": "c1", "role": r, "content": f"small talk {i} about volcanoes"}
              for i in range(30) for r in ("user", "assistant")]
    lines += [{"conversation_id": "c1", "role": "user", "content": "Switch my seat preference to window seat."}]
    data.write_text("\n".join(json.dumps(x) for x in lines))
    out_json = tmp_path / "ingest.json"
    cmd = [sys.executable, "-m", "tiermem.evals.bench_ingest", "--data", str(data), "--rounds", "1",
           "--batch", "20", "--json", str(out_json), *extra]
    out = subprocess.run(cmd, env=child_env(), capture_output=True, text=True, timeout=300,
                         cwd=Path(__file__).resolve().parents[1])
    assert out.returncode == 0, out.stderr[-3000:]
    assert "| bulk ingest with embeddings (write + catch-up), turns/s |" in out.stdout
    rep = json.loads(out_json.read_text())
    assert rep["turns"] == len(lines)
    assert rep["superseded_pairs"] == 1  # the seat correction, in both modes (the run fails otherwise)
    # which new mode ran: `tiermem import --index`'s unless asked for the two steps
    assert rep["embedder"]["new"].startswith("import, then" if "sequential" in extra else "import with the catch-up")
    for mode in ("new", "baseline"):
        (r,) = rep["rounds_raw"][mode]
        assert r["pending_after"] == 0 and r["turns"] == len(lines)
        assert len(r["chunk_ms"]) == 4  # 62 messages in chunks of 20
        assert rep["summary"][mode]["total_turns_per_s"]["p50"] > 0
        assert r["machine_speed"] > 0  # the machine's pace before the round, beside its figures
        if row is not None:
            assert rep["summary"][mode][row]["p50"] > 0
