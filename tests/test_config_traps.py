"""The config traps of issue 20: partial nested overrides keep their class's defaults,
`Config()` reads the TOML file env TIERMEM_CONFIG names like `Config.load()` does, and the
plan's explain output calls a slice's share a share, not a cap.

Each test fails on the code before the fix: the partial share fell back to SliceShares'
generic defaults (0.15/0.15/0.4), `Config()` returned the 4000 default, explain said "cap".
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tiermem.config import DEFAULT_HOT_BUDGET_TOKENS, Config
from tiermem.planner.plan import Plan, PlanItem

LAYERS = {"pinned": 0.1, "summary": 0.1, "tail": 0.1}


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TIERMEM_CONFIG", "TIERMEM_HOT_BUDGET_TOKENS"):
        monkeypatch.delenv(name, raising=False)


# (how the one share is set): the other shares keep their defaults, and a class of
# slice_shares given without its share keeps its own default (0.25), not SliceShares' (0.4)
@pytest.mark.parametrize("how", [
    "env",     # TIERMEM_LAYER_SHARES__TAIL=0.2
    "toml",    # the same override under [layer_shares]
    "kwargs",  # Config(layer_shares={"tail": 0.2})
])
def test_one_share_keeps_the_class_defaults(how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if how == "env":
        monkeypatch.setenv("TIERMEM_LAYER_SHARES__TAIL", "0.2")
        monkeypatch.setenv("TIERMEM_SLICE_SHARES", '{"new_subtask": {}}')
        cfg = Config(data_dir=tmp_path)
    elif how == "toml":
        f = tmp_path / "c.toml"
        f.write_text("[layer_shares]\ntail = 0.2\n[slice_shares.new_subtask]\n")
        cfg = Config.load(f, data_dir=tmp_path)
    else:
        cfg = Config(data_dir=tmp_path, layer_shares={"tail": 0.2}, slice_shares={"new_subtask": {}})
    assert cfg.layer_shares.model_dump() == {**LAYERS, "tail": 0.2}
    assert {k: v.retrieved for k, v in cfg.slice_shares.items()} == {"new_subtask": 0.25, "default": 0.4}


def test_env_share_merges_with_a_toml_share_of_the_same_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "c.toml"
    f.write_text("[layer_shares]\npinned = 0.3\n")
    monkeypatch.setenv("TIERMEM_LAYER_SHARES__TAIL", "0.25")
    cfg = Config.load(f, data_dir=tmp_path)
    assert cfg.layer_shares.model_dump() == {**LAYERS, "pinned": 0.3, "tail": 0.25}


def test_config_reads_the_toml_file_env_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "c.toml"
    f.write_text("hot_budget_tokens = 1234\nretrieval_k = 7\n")
    monkeypatch.setenv("TIERMEM_CONFIG", str(f))
    assert Config(data_dir=tmp_path).hot_budget_tokens == 1234
    assert Config().hot_budget_tokens == Config.load().hot_budget_tokens == 1234


# (source set above the file, expected hot_budget_tokens): kwargs > env > TOML > defaults
@pytest.mark.parametrize(("env", "kwarg", "want"), [
    (None, None, 1234),    # the file over the default
    ("2222", None, 2222),  # env over the file
    ("2222", 3333, 3333),  # a keyword argument over both
])
def test_precedence(env: str | None, kwarg: int | None, want: int, tmp_path: Path,
                    monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "c.toml"
    f.write_text("hot_budget_tokens = 1234\n")
    monkeypatch.setenv("TIERMEM_CONFIG", str(f))
    if env is not None:
        monkeypatch.setenv("TIERMEM_HOT_BUDGET_TOKENS", env)
    kw = {} if kwarg is None else {"hot_budget_tokens": kwarg}
    assert Config(data_dir=tmp_path, **kw).hot_budget_tokens == want
    assert Config.load(data_dir=tmp_path, **kw).hot_budget_tokens == want


def test_load_path_wins_over_the_env_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env_file, explicit = tmp_path / "env.toml", tmp_path / "explicit.toml"
    env_file.write_text("hot_budget_tokens = 1234\n")
    explicit.write_text("retrieval_k = 9\n")
    monkeypatch.setenv("TIERMEM_CONFIG", str(env_file))
    cfg = Config.load(explicit, data_dir=tmp_path)
    assert (cfg.retrieval_k, cfg.hot_budget_tokens) == (9, DEFAULT_HOT_BUDGET_TOKENS)


def test_config_env_file_missing_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIERMEM_CONFIG", str(tmp_path / "nope.toml"))
    with pytest.raises(FileNotFoundError, match=r"nope\.toml"):
        Config(data_dir=tmp_path)


def test_explain_says_share_not_cap() -> None:
    # a pinned slice past its first-pass share (leftovers flow to it): 173 tokens, share 78
    plan = Plan("c", "q", "default", "test", 1000, tokens=173,
                items=[PlanItem("pinned", "c", [3], "hot", "verbatim", 173, 1.0, "pinned")],
                shares={"pinned": 78})
    text = plan.explain()
    assert "pinned: 173 tokens (share 78)" in text
    assert "cap" not in text
