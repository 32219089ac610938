"""`tiermem eval locomo / cost / session --data F` check every turn of a LoCoMo file as
`tiermem import` does (evals.conversations.checked_samples), before writing anything: a
bad turn refuses the file with import's error, naming the sample and the turn's dia_id,
one line, exit 1. Before (a review, 2026-12-05), the evals loaded the file unchecked: a
session dated before 1970 stopped the run at its first append, after the earlier samples
were written, with an error naming neither sample nor turn; and the reader both of them
used took a turn with no text as an empty message and a number as its digits (import
stored those too)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import tm
from click.testing import Result
from locomo_mini import question, sample, write

from tiermem.config import Config
from tiermem.memory import Memory
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

GOOD = sample("s1", ["I moved to Lisbon.", "Nice.", "Yes, in May."], [question("Where?", "Lisbon", ["D1:1"])])


def bad_sample(turns: list[Any], date: str | None = None) -> dict[str, Any]:
    s = sample("s2", ["x"] * len(turns), [question("What?", "hi", ["D1:1"])], speakers=("Cy", "Di"))
    for i, t in enumerate(turns):  # a dict: fields over the good turn's (None drops one); else the item itself
        s["conversation"]["session_1"][i] = (
            {k: v for k, v in {**s["conversation"]["session_1"][i], **t}.items() if v is not None}
            if isinstance(t, dict) else t)
    if date is not None:
        s["conversation"]["session_1_date_time"] = date
    return s


# (id, second sample, the bad turns as the error names them, words the error must hold)
CASES: list[tuple[str, dict[str, Any], list[str], str]] = [
    # a turn with no text: it was stored as an empty message
    ("missing_text", bad_sample([{"text": None}, {}]), ["D1:1"], "text: missing"),
    # a text that is a number: it was stored as its digits
    ("text_a_number", bad_sample([{}, {"text": 42}]), ["D1:2"], "text: must be a string, got number"),
    # a speaker that is a list: the turn became a "user" of unknown speaker
    ("speaker_a_list", bad_sample([{"speaker": ["Cy"]}, {}]), ["D1:1"], "speaker: must be a string, got array"),
    # an item of the session that is not a turn object: silently left out; named by its place
    ("not_an_object", bad_sample(["hello", {}]), ["#1 of session_1"], "must be an object, got string"),
    # a session dated before 1970: created_at below 0 for each of its turns
    ("dated_1960", bad_sample([{}, {}], "1:56 pm on 8 May, 1960"), ["D1:1", "D1:2"], "created_at"),
]
# (id, the command's arguments after the root options: FILE is the data file, DIR an eval's data dir)
COMMANDS: list[tuple[str, tuple[str, ...]]] = [
    ("import", ("import", "FILE")),  # the yardstick: the same reader, the same error
    ("eval_locomo", ("eval", "locomo", "--data", "FILE", "--budget", "500", "--data-dir", "DIR", "--no-hot", "--quiet")),
    ("eval_cost", ("eval", "cost", "--data", "FILE", "--budget", "500", "--data-dir", "DIR", "--no-hot", "--quiet")),
    ("eval_session", ("eval", "session", "--data", "FILE", "--budget", "500", "--data-dir", "DIR", "--no-hot",
                      "--quiet")),
]


def messages_stored(data_dir: Path, embedder: FastEmbedder) -> int:
    """Messages in the data dir, over every namespace (none: no database)."""
    if not (data_dir / "tiermem.db").exists():
        return 0
    with Memory(Config(data_dir=data_dir), embedder=embedder, hot=False, background_indexing=False) as mem:
        return int(mem.stats()["cold"]["messages"])


def run(tmp_path: Path, embedder: FastEmbedder, args: tuple[str, ...], path: Path) -> Result:
    where = {"FILE": str(path), "DIR": str(tmp_path / "eval")}
    return tm(tmp_path, embedder, "", *[where.get(a, a) for a in args])


@pytest.mark.parametrize("args", [c[1] for c in COMMANDS], ids=[c[0] for c in COMMANDS])
@pytest.mark.parametrize(("bad", "turns", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_malformed_turn_refuses_the_file_naming_sample_and_turn(tmp_path: Path, embedder: FastEmbedder,
                                                                  args: tuple[str, ...], bad: dict[str, Any],
                                                                  turns: list[str], words: str) -> None:
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([GOOD, bad]), encoding="utf-8")
    r = run(tmp_path, embedder, args, path)
    assert r.exit_code == 1, r.output
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.output, r.output
    assert f"{path}: {len(turns)} bad turn(s), nothing imported" in r.stderr, r.stderr
    for t in turns:
        assert f"sample #2: sample 's2', turn '{t}': " in r.stderr and words in r.stderr, r.stderr
    # nothing written: not even the good first sample
    assert messages_stored(tmp_path / "data", embedder) == messages_stored(tmp_path / "eval", embedder) == 0


def test_a_good_file_still_runs(tmp_path: Path, embedder: FastEmbedder) -> None:
    # the eval on the good sample alone: checked, then replayed as before
    path = write(tmp_path / "locomo.json", [GOOD])
    r = tm(tmp_path, embedder, "", "eval", "locomo", "--data", str(path), "--budget", "500", "--method",
           "full_context", "--json", "--quiet", "--no-hot")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["baselines"]["full_context"]["answer_coverage"] == 1.0
