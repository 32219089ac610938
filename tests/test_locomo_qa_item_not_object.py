"""An item of a LoCoMo sample's `qa` that is not an object refuses the file, named by its
sample and its place in `qa`, as a question whose `evidence` is not a list already was.
`parse_sample` skipped it: the question vanished from every figure (the question count,
recall, the bill of `eval session`) and nothing said the file was malformed. The checked
readers (`tiermem eval`'s, `tiermem import`) name the file too. Every refused case fails
on the code before (the sample parsed, one question short); the kept ones pass both."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import tm
from locomo_mini import question, sample, write

from tiermem.config import Config
from tiermem.evals.conversations import checked_samples
from tiermem.evals.locomo import LocomoError, parse_sample
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.errors import DataFileError

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

TEXTS = ["I adopted a grey cat named Pixel.", "Nice! How old is Pixel?", "She is two."]
GOOD = question("What is the cat called?", "Pixel", ["D1:1"])


# (the item, the JSON type the error names) -- each was skipped without a word
@pytest.mark.parametrize(("item", "kind"), [
    (7, "number"),  # the report's kind of slip
    ("What is the cat called?", "string"),  # a bare question, its answer and evidence lost
    (None, "null"),  # a trailing null of a generated file
    ([GOOD], "array"),  # a question wrapped once too often
])
def test_parse_sample_names_the_sample_and_the_item(item: Any, kind: str) -> None:
    raw = sample("s-1", TEXTS, [GOOD, item])
    with pytest.raises(LocomoError) as exc:
        parse_sample(raw, 0)
    assert str(exc.value) == (f"sample 's-1': qa item #2 must be an object (a question with its answer and "
                              f"evidence), got {kind}")


@pytest.mark.parametrize("qa", [
    [GOOD],  # an ordinary sample
    [],  # no questions
    None,  # qa null: no questions, as before
])
def test_a_well_formed_qa_still_parses(qa: list[dict[str, Any]] | None) -> None:
    raw = sample("s-1", TEXTS, [])
    raw["qa"] = qa
    assert len(parse_sample(raw, 0).qa) == len(qa or [])


def test_the_checked_reader_names_the_file(tmp_path: Path) -> None:
    # tiermem eval's reader (locomo, cost, session, recall_rounds): the file refused before any write
    data = write(tmp_path / "data.json", [sample("a", TEXTS, [GOOD]), sample("b", TEXTS, [GOOD, GOOD, 3])])
    with pytest.raises(DataFileError) as exc:
        checked_samples(data, Config(data_dir=tmp_path))
    assert str(data) in str(exc.value) and "sample 'b'" in str(exc.value) and "qa item #3" in str(exc.value)


def test_import_refuses_the_file_and_writes_nothing(tmp_path: Path, embedder: FastEmbedder) -> None:
    f = tmp_path / "lo.json"
    f.write_text(json.dumps([sample("a", TEXTS, [GOOD, 7])]))
    r = tm(tmp_path, embedder, "", "import", str(f))
    assert r.exit_code == 1, r.output
    assert str(f) in r.stderr and "sample 'a': qa item #2 must be an object" in r.stderr, r.stderr
    assert "Traceback" not in r.output
    assert not (tmp_path / "data" / "tiermem.db").exists()  # refused before the store was opened
