"""Every LoCoMo reader's refusal names the file once, in front (`x.json: problem`), as
import's DataFileError does. The lenient reader (locomo.load_samples: second_model,
recall_misses, knowledge, bench_cold) named it only for its own checks, never in
parse_sample's ('sample 'b': qa item #1 must be an object ...': which file?), and
`tiermem eval`'s checked reader (conversations.checked_samples) put the path in front of
messages that held it already ('x.json: x.json is not a JSON list of LoCoMo samples',
'x.json: cannot read x.json as JSON: ...', 'x.json: LoCoMo data file x.json does not
exist'). On the code before, every row of the lenient reader fails (its parse_sample rows
name no file, its own put the path inside the sentence), as do the checked reader's
file-level rows and the command (the path twice); the checked reader's parse_sample rows
pass before and after."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import tm
from locomo_mini import question, sample

from tiermem.config import Config
from tiermem.evals.conversations import checked_samples
from tiermem.evals.locomo import LocomoError, load_samples
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.errors import DataFileError

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

GOOD = sample("a", ["I moved to Lisbon.", "Nice."], [question("Where?", "Lisbon", ["D1:1"])])
QA_NOT_AN_OBJECT = {**sample("b", ["Hi.", "Hello."], []), "qa": [7]}

# (id, what the file holds -- None: no file, "DIR": a directory --, words of the problem)
FILES: list[tuple[str, str | None, str]] = [
    ("missing", None, "no such LoCoMo data file"),
    ("directory", "DIR", "is a directory"),
    ("not_json", "[{", "cannot be read as JSON"),
    ("not_a_list", json.dumps({"sample_id": "a"}), "is not a JSON list of LoCoMo samples"),
    # parse_sample's own refusals: the lenient reader named no file for them
    ("sample_not_an_object", json.dumps([GOOD, 3]), "sample #1 is not an object"),
    ("no_conversation", json.dumps([GOOD, {"sample_id": "b"}]), "sample 'b' has no 'conversation' object"),
    ("qa_item_not_an_object", json.dumps([GOOD, QA_NOT_AN_OBJECT]), "sample 'b': qa item #1 must be an object"),
]


def _file(tmp_path: Path, holds: str | None) -> Path:
    path = tmp_path / "lo.json"
    if holds == "DIR":
        path.mkdir()
    elif holds is not None:
        path.write_text(holds, encoding="utf-8")
    return path


def _named_once_in_front(message: str, path: Path, words: str) -> None:
    assert message.startswith(f"{path}: ") and message.count(str(path)) == 1, message
    assert words in message, message


@pytest.mark.parametrize(("holds", "words"), [c[1:] for c in FILES], ids=[c[0] for c in FILES])
def test_the_lenient_reader_names_the_file_once(tmp_path: Path, holds: str | None, words: str) -> None:
    path = _file(tmp_path, holds)
    with pytest.raises(LocomoError) as exc:
        load_samples(path)
    _named_once_in_front(str(exc.value), path, words)


@pytest.mark.parametrize(("holds", "words"), [c[1:] for c in FILES], ids=[c[0] for c in FILES])
def test_the_checked_reader_names_the_file_once(tmp_path: Path, holds: str | None, words: str) -> None:
    path = _file(tmp_path, holds)
    with pytest.raises(DataFileError) as exc:
        checked_samples(path, Config(data_dir=tmp_path / "data"))
    _named_once_in_front(str(exc.value), path, words)
    assert exc.value.path == str(path)


def test_the_command_names_the_file_once(tmp_path: Path, embedder: FastEmbedder) -> None:
    # the report's case as tiermem eval prints it: one line, the path once
    path = _file(tmp_path, json.dumps({"sample_id": "a"}))
    r = tm(tmp_path, embedder, "", "eval", "cost", "--data", str(path), "--budget", "500",
           "--data-dir", str(tmp_path / "eval"), "--no-hot", "--quiet")
    assert r.exit_code == 1, r.output
    assert r.output.count(str(path)) == 1 and "is not a JSON list of LoCoMo samples" in r.output, r.output
    assert "Traceback" not in r.output
