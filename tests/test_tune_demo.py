"""`tiermem tune` with no data file tunes on the bundled demo conversation (so it runs
outside the development checkout); its phrase evidence becomes probes on messages.
Before, DATA was a required argument (a usage error without it)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tiermem.cli import CliState, cli
from tiermem.evals.demo_data import demo_dataset
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in


def test_demo_probes_point_at_the_messages_that_state_them() -> None:
    data = demo_dataset()
    (conv,) = data.conversations
    by_question = {p.question: p for p in conv.probes}
    # (question, the phrase its one evidence message must contain, role)
    table = [
        ("Do I have any food allergies you should keep in mind for the dinner booking?", "tree nuts", "user"),
        ("What's my total budget for the Lisbon trip now?", "3,200", "user"),  # the correction, not 2,000
        ("What name did I ask you to call me?", "call me Dani", "user"),
    ]
    for question, phrase, role in table:
        (i,) = by_question[question].evidence
        assert isinstance(i, int)
        msg = conv.messages[i]
        assert phrase.lower() in msg["content"].lower() and msg["role"] == role
    assert data.format == "demo" and data.n_messages > 150


def test_tune_without_a_file_runs_on_the_demo(shared_vectors: FastEmbedder) -> None:
    # the replies' attribution and the candidate's log embed the same demo turns (in other
    # memo scopes): computed once (conftest.shared_vectors)
    r = CliRunner().invoke(cli, ["tune", "--budgets", "600", "--json"], obj=CliState(embedder=shared_vectors))
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)
    assert res["format"] == "demo" and res["conversations"] == ["demo-dani"] and res["probes"] == 6
    point = res["candidates"][0]["budgets"]["600"]
    assert point["missing_evidence"] == 0 and point["probes_with_evidence"] == 6
    assert 0.0 < point["evidence_recall"] <= 1.0
    assert point["budget_violations"] == 0 and point["token_mismatches"] == 0
    # the demo's replies restate its planted facts: the label-free measure has replies to score
    assert point["replies_with_sources"] > 0 and point["reply_recall"] is not None
