"""`tiermem eval cost` names the replayed sample in its result by the label `eval session`
reports it under (locomo.sample_labels): `--sample dup-2` replayed the second of two 'dup'
samples and then reported `"sample": "dup"`, the first one's name, so the figure could not
be told from the first's (and `--sample 2`, the same sample by index, said the same).
Real SQLite, a tiny file, the full_context method only (no model needed for it).

The two rows for the second 'dup' fail on the code before (a git archive copy of HEAD:
reported 'dup'); the unique id and the first 'dup' pass before and after."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import tm
from locomo_mini import question, sample

from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

Q = [question("Where?", "Lisbon", ["D1:1"])]
# (sample_id, its number of turns): the turns replayed tell the two 'dup' samples apart
SAMPLES = [("dup", 2), ("solo", 4), ("dup", 6)]


# (what --sample says, the label the result reports, the turns replayed)
@pytest.mark.parametrize(("which", "label", "turns"), [
    ("dup-2", "dup-2", 6),  # the report's case: the second 'dup', asked for by its label
    ("2", "dup-2", 6),  # the same sample by index: the result names it as eval session does
    ("0", "dup", 2),  # the first 'dup' keeps its bare id
    ("solo", "solo", 4),  # a unique id is its own label
])
def test_the_result_names_the_sample_by_its_label(tmp_path: Path, embedder: FastEmbedder, which: str,
                                                  label: str, turns: int) -> None:
    f = tmp_path / "lo.json"
    f.write_text(json.dumps([sample(sid, [f"turn {i} of {sid}" for i in range(n)], Q) for sid, n in SAMPLES]))
    r = tm(tmp_path, embedder, "", "eval", "cost", "--data", str(f), "--sample", which, "--budget", "500",
           "--method", "full_context", "--data-dir", str(tmp_path / "eval"), "--no-hot", "--quiet", "--json")
    assert r.exit_code == 0, r.output
    result = json.loads(r.stdout)
    assert (result["sample"], result["turns_replayed"]) == (label, turns)
