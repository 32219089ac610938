"""`layer_shares` whose sum is past 1 are refused, naming the setting and the limit, from
keyword arguments, env (each spelling) and a file, and after they merge (one share set alone
counts the others' defaults); nothing is written.

Each share was checked alone (0..1): pinned / summary / tail 1.0 each gave the stable layers
caps of 6,000 tokens on a 2,000-token budget, the first layers took all of it, and a recall
question (whose retrieved turns take the room the stable layers leave: planner.build) got
no retrieved turn, silently. On the code before, every refusal case fails (accepted); the
accepted cases pass there too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pydantic
import pytest
from click.testing import CliRunner

from tiermem import Config, Memory
from tiermem.cli import CliState, cli
from tiermem.config import LayerShares

pytestmark = pytest.mark.usefixtures("clean_env")
LIMIT_SAID = "sum must be at most 1"  # the limit (config.MAX_LAYER_SHARES_SUM), as the error says it

# (how they are given: kwargs / env variables / file text, the setting the error names) -- each past 1
REFUSED: list[tuple[dict[str, Any], dict[str, str], str, str]] = [
    ({"layer_shares": {"pinned": 1.0, "summary": 1.0, "tail": 1.0}}, {}, "", "layer_shares"),  # the reviewer's case
    ({"layer_shares": {"tail": 0.9}}, {}, "", "layer_shares"),  # one share alone: with the defaults, 1.1
    ({"planner": {"layer_shares": {"summary": 0.5, "pinned": 0.5}}}, {}, "",
     "planner.layer_shares"),  # in its section: 1.1
    ({}, {"TIERMEM_LAYER_SHARES__TAIL": "0.95"}, "", "layer_shares"),  # env, one leaf
    ({}, {"TIERMEM_PLANNER__LAYER_SHARES__PINNED": "0.9"}, "", "planner.layer_shares"),  # env, in its section
    ({}, {"TIERMEM_LAYER_SHARES": '{"pinned": 0.4, "summary": 0.4, "tail": 0.4}'}, "", "layer_shares"),  # env JSON
    ({}, {}, "[layer_shares]\npinned = 1.0\nsummary = 1.0\ntail = 1.0\n", "layer_shares"),  # a file
    ({}, {}, "[planner.layer_shares]\ntail = 0.85\n", "planner.layer_shares"),  # a file, in its section
    ({}, {"TIERMEM_LAYER_SHARES__TAIL": "0.6"}, "[layer_shares]\npinned = 0.5\n", "layer_shares"),  # file + env: 1.2
]
REFUSED_IDS = ["all-one", "tail-alone", "kwargs-section", "env-leaf", "env-section", "env-json", "file",
               "file-section", "file-and-env"]
# (the shares given, the sum): accepted, up to the limit itself
ACCEPTED = [
    ({}, 0.3),  # the defaults
    ({"tail": 0.8}, 1.0),  # at the limit
    ({"pinned": 0.1, "summary": 0.2, "tail": 0.7}, 1.0),  # at the limit in float: 1.0000000000000002
    ({"pinned": 0.0, "summary": 0.0, "tail": 1.0}, 1.0),  # the tail alone takes the budget
    ({"pinned": 0.5}, 0.7),  # tests/test_hot_pins_protected_budget.py's case
]


def _load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kwargs: dict[str, Any], env: dict[str, str],
          text: str) -> Config:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    if text:
        (tmp_path / "c.toml").write_text(text)
        return Config.load(tmp_path / "c.toml", data_dir=tmp_path / "data", **kwargs)
    return Config(data_dir=tmp_path / "data", **kwargs)


@pytest.mark.parametrize(("kwargs", "env", "text", "named"), REFUSED, ids=REFUSED_IDS)
def test_shares_past_the_budget_are_refused_naming_the_limit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kwargs: dict[str, Any], env: dict[str, str], text: str,
        named: str) -> None:
    with pytest.raises(pydantic.ValidationError) as info:
        _load(tmp_path, monkeypatch, kwargs, env, text)
    assert [".".join(map(str, e["loc"])) for e in info.value.errors()] == [named]
    assert LIMIT_SAID in str(info.value)
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize(("shares", "total"), ACCEPTED, ids=["defaults", "tail-0.8", "tenths", "tail-only", "pinned-0.5"])
def test_shares_within_the_budget_are_accepted(tmp_path: Path, shares: dict[str, float], total: float) -> None:
    got = Config(data_dir=tmp_path, layer_shares=shares).layer_shares
    assert sum(got.model_dump().values()) == pytest.approx(total)


def test_an_assignment_past_the_budget_is_refused_and_leaves_the_shares(tmp_path: Path) -> None:
    cfg = Config(data_dir=tmp_path)
    with pytest.raises(pydantic.ValidationError, match=LIMIT_SAID):
        cfg.layer_shares = {"pinned": 0.6, "summary": 0.6}  # type: ignore[assignment]
    assert cfg.layer_shares == LayerShares()


@pytest.mark.parametrize(("env", "text"), [
    ({"TIERMEM_LAYER_SHARES__TAIL": "1.0"}, ""),  # env: tail 1.0 over the defaults
    ({}, "[planner.layer_shares]\npinned = 1.0\nsummary = 1.0\ntail = 1.0\n"),  # the reviewer's shares in a file
], ids=["env-tail-1", "file-all-one"])
@pytest.mark.parametrize("command", [
    ["config", "--json"],  # before: exit 0
    ["append", "c1", "--role", "user", "--content", "hello"],  # before: the data dir written
], ids=["config", "append"])
def test_the_cli_refuses_them_in_one_line_writing_nothing(tmp_path: Path, env: dict[str, str], text: str,
                                                          command: list[str]) -> None:
    args = ["--data-dir", str(tmp_path / "data")]
    if text:
        (tmp_path / "c.toml").write_text(text)
        args += ["--config", str(tmp_path / "c.toml")]
    res = CliRunner().invoke(cli, [*args, *command], obj=CliState(), env=env)
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output
    assert "layer_shares: " in res.stderr and LIMIT_SAID in res.stderr, res.stderr
    assert not (tmp_path / "data").exists()


def test_at_the_limit_a_recall_question_still_gets_retrieved_turns(tmp_path: Path) -> None:
    # the limit is where the caps fill the budget together: there the per-turn part still
    # gets what the stable layers leave unused (no summary yet, a short pinned block)
    with Memory(Config(data_dir=tmp_path / "data", layer_shares={"pinned": 0.1, "summary": 0.1, "tail": 0.8}),
                hot=False, background_indexing=False) as mem:
        mem.append_many("c1", [m for i in range(40) for m in (
            {"role": "user", "content": f"Message {i}: on day {i} I went hiking in the Alps with my teal pack. " * 3},
            {"role": "assistant", "content": f"Noted fact {i}, teal and hiking. " * 4})])
        mem.pin("c1", 0)
        ctx = mem.context("c1", "what did I say about hiking in message 3?", 2000)
        assert ctx.tokens <= 2000
        assert sum(ctx.plan.shares[s] for s in ("pinned", "summary", "tail")) <= 2000
        assert ctx.plan.slice_tokens().get("retrieved", 0) > 0
