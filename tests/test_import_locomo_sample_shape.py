"""A LoCoMo file with one malformed sample is refused naming that sample. The reader took
a list for LoCoMo only when every item was a sample with a `conversation` object, so one
bad sample made the whole file the conversations format: every sample, the good ones
too, was refused for a `conversation_id` it was never meant to have, and the bad one
was not named (a bug hunt, 2026-12-06)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import tm
from convo_fixtures import tiny_locomo

from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

GOOD = tiny_locomo()[0]

# (id, the file's samples, words the error must hold)
FILES: list[tuple[str, list[Any], str]] = [
    # a second sample whose conversation is null
    ("conversation_null", [GOOD, {**GOOD, "sample_id": "t-2", "conversation": None}],
     "sample 't-2' has no 'conversation' object"),
    # a second sample whose conversation is a list, not an object
    ("conversation_list", [GOOD, {**GOOD, "sample_id": "t-2", "conversation": []}],
     "sample 't-2' has no 'conversation' object"),
    # an item of the list that is no sample at all (evals.locomo counts samples from 0)
    ("item_not_object", [GOOD, 7], "sample #1 is not an object"),
]


@pytest.mark.parametrize(("samples", "words"), [f[1:] for f in FILES], ids=[f[0] for f in FILES])
@pytest.mark.parametrize("skip_bad", [False, True], ids=["strict", "skip_bad"])
def test_a_malformed_sample_is_named_and_nothing_written(tmp_path: Path, embedder: FastEmbedder,
                                                         samples: list[Any], words: str, skip_bad: bool) -> None:
    f = tmp_path / "lo.json"
    f.write_text(json.dumps(samples))
    r = tm(tmp_path, embedder, "", "import", str(f), *(["--skip-bad"] if skip_bad else []))
    assert r.exit_code == 1, r.output
    assert words in r.stderr and "conversation_id" not in r.stderr, r.stderr
    assert "Traceback" not in r.output
    assert not (tmp_path / "data" / "tiermem.db").exists()  # refused before the store was opened
