"""`tiermem eval cost --sample ID` refuses an id the file gives to two samples. pick_sample
took the first sample with that id: the second could only be reached by index, and
nothing said the id was ambiguous. A name that means one sample picks it: its sample_id,
or the `<id>-2` label that `eval session` and `recall_rounds` report the second under
(locomo.sample_labels); an index picks by place, as before. Real SQLite, a tiny file.

The refusals fail on the code before (it returned the first sample); the label case too
(before: "no sample 'dup-2'"); the index and unique-id cases pass before and after."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import tm
from locomo_mini import question, sample

from tiermem.evals.cost import pick_sample
from tiermem.evals.locomo import LocomoError, parse_sample
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

Q = [question("Where?", "Lisbon", ["D1:1"])]
# sample_ids in file order, each sample's first turn tells them apart
IDS = ["dup", "solo", "dup", "x", "x", "x-2"]
SAMPLES = [parse_sample(sample(sid, [f"turn of sample {i}", "ok"], Q), i) for i, sid in enumerate(IDS)]


def _first_turn(i: int) -> str:
    return SAMPLES[i].sessions[0].turns[0].text


# (what --sample says, the index of the sample it picks)
@pytest.mark.parametrize(("which", "index"), [
    ("solo", 1),  # a unique id, as before
    ("dup-2", 2),  # the label eval session gives the second 'dup': before, no such sample
    ("0", 0),  # an index: the first 'dup'
    ("2", 2),  # an index: the second 'dup', the one way before
    (5, 5),  # an int from a library caller
])
def test_a_name_or_an_index_picks_one_sample(which: str | int, index: int) -> None:
    assert pick_sample(SAMPLES, which).sessions[0].turns[0].text == _first_turn(index)


# (what --sample says, the indexes the error names)
@pytest.mark.parametrize(("which", "indexes"), [
    ("dup", "0, 2"),  # the report's case: the first was taken, silently
    ("x", "3, 4"),
    # the second 'x' is reported as 'x-2', which is also the last sample's own id
    ("x-2", "4, 5"),
])
def test_a_name_of_two_samples_is_refused(which: str, indexes: str) -> None:
    with pytest.raises(LocomoError) as exc:
        pick_sample(SAMPLES, which)
    msg = str(exc.value)
    assert f"sample {which!r} is ambiguous" in msg and f"indexes {indexes}" in msg, msg
    assert "--sample" in msg


def test_the_command_refuses_and_writes_nothing(tmp_path: Path, embedder: FastEmbedder) -> None:
    f = tmp_path / "lo.json"
    f.write_text(json.dumps([sample(sid, ["a turn", "ok"], Q) for sid in ["dup", "dup"]]))
    where = tmp_path / "eval"
    r = tm(tmp_path, embedder, "", "eval", "cost", "--data", str(f), "--sample", "dup", "--budget", "500",
           "--data-dir", str(where), "--no-hot", "--quiet")
    assert r.exit_code == 1, r.output
    assert "'dup' is ambiguous" in r.output and "--sample 0" in r.output, r.output
    assert "Traceback" not in r.output
    assert not where.exists()  # refused before the data dir was made
