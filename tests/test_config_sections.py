"""Config files in sections (`[hot]`, `[planner]`, ...) beside the flat names: the same
attributes either way, precedence kept across the two spellings, errors that name the
dotted setting and its limit. On the code before sections every sectioned case failed
with "Extra inputs are not permitted" on the section's name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tiermem.cli import CliState, cli
from tiermem.config import Config, explain_sources
from tiermem.config_sections import DOTTED, SECTIONS

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in


def write(tmp_path: Path, text: str, name: str = "c.toml") -> Path:
    f = tmp_path / name
    f.write_text(text)
    return f


# (sectioned TOML, attribute, expected value): one setting of each section
@pytest.mark.parametrize(("toml", "attr", "want"), [
    ("[hot]\nbudget_tokens = 3000\n", "hot_budget_tokens", 3000),             # prefix stripped
    ("[hot]\nredis_url = \"redis://h:1/0\"\n", "redis_url", "redis://h:1/0"),  # no prefix to strip
    ("[warm]\nmax_turns_behind = 7\n", "warm_max_turns_behind", 7),
    ("[warm]\nsummarizer = \"extractive\"\n", "summarizer", "extractive"),
    ("[retrieval]\nk = 9\n", "retrieval_k", 9),
    ("[embedding]\nbatch_size = 8\n", "embedding_batch_size", 8),
    ("[scheduler]\nenabled = false\n", "scheduler_enabled", False),
    ("[service]\nport = 9090\n", "http_port", 9090),
    ("[limits]\nmax_id_chars = 64\n", "max_id_chars", 64),
    ("[storage]\ndb_filename = \"x.db\"\n", "db_filename", "x.db"),
    ("[planner]\ntail_anchor_turns = 4\n", "tail_anchor_turns", 4),
    ("hot_budget_tokens = 3000\n", "hot_budget_tokens", 3000),                # the flat name still works
])
def test_a_sectioned_setting_sets_its_flat_attribute(toml: str, attr: str, want: object, tmp_path: Path) -> None:
    cfg = Config.load(write(tmp_path, toml), data_dir=tmp_path)
    assert getattr(cfg, attr) == want


def test_planner_shares_in_a_section_keep_the_class_defaults(tmp_path: Path) -> None:
    cfg = Config.load(write(tmp_path, "[planner.slice_shares.default]\nretrieved = 0.05\n"
                                      "[planner.layer_shares]\npinned = 0.2\n"), data_dir=tmp_path)
    assert {k: v.retrieved for k, v in cfg.slice_shares.items()} == {"default": 0.05, "new_subtask": 0.25}
    assert (cfg.layer_shares.pinned, cfg.layer_shares.tail) == (0.2, 0.1)


def test_a_json_file_in_sections(tmp_path: Path) -> None:
    f = write(tmp_path, json.dumps({"hot": {"budget_tokens": 2500}, "retrieval_k": 4}), "c.json")
    cfg = Config.load(f, data_dir=tmp_path)
    assert (cfg.hot_budget_tokens, cfg.retrieval_k) == (2500, 4)


def test_keyword_arguments_and_model_validate_take_sections(tmp_path: Path) -> None:
    assert Config(data_dir=tmp_path, hot={"budget_tokens": 2000}).hot_budget_tokens == 2000
    assert Config.model_validate({"data_dir": str(tmp_path), "warm": {"keep_versions": 5}}).warm_keep_versions == 5


# (file, env, kwargs, expected hot_budget_tokens): kwargs > env > file, whichever spelling
@pytest.mark.parametrize(("file", "env", "kwargs", "want"), [
    ("[hot]\nbudget_tokens = 1000\n", {"TIERMEM_HOT_BUDGET_TOKENS": "2000"}, {}, 2000),     # flat env over section
    ("hot_budget_tokens = 1000\n", {"TIERMEM_HOT__BUDGET_TOKENS": "2000"}, {}, 2000),      # section env over flat
    ("[hot]\nbudget_tokens = 1000\n", {"TIERMEM_HOT__BUDGET_TOKENS": "2000"},
     {"hot_budget_tokens": 3000}, 3000),                                                  # kwargs over both
    ("hot_budget_tokens = 1000\n", {}, {"hot": {"budget_tokens": 3000}}, 3000),           # sectioned kwargs
    ("[hot]\nbudget_tokens = 1000\n", {}, {}, 1000),                                      # the file alone
])
def test_precedence_across_spellings(file: str, env: dict[str, str], kwargs: dict[str, object], want: int,
                                     tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert Config.load(write(tmp_path, file), data_dir=tmp_path, **kwargs).hot_budget_tokens == want


def test_a_sectioned_env_share_merges_with_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIERMEM_PLANNER__SLICE_SHARES__NEW_SUBTASK__RETRIEVED", "0.05")
    cfg = Config.load(write(tmp_path, "[planner.slice_shares.default]\nretrieved = 0.03\n"), data_dir=tmp_path)
    assert {k: v.retrieved for k, v in cfg.slice_shares.items()} == {"default": 0.03, "new_subtask": 0.05}


# (file content, what the one-line error names: the dotted setting and, for a range, its limit)
@pytest.mark.parametrize(("content", "named"), [
    ("[hot]\nbudget_tokens = 10\n", ["hot.budget_tokens", "greater than or equal to 64"]),   # under its minimum
    ("[retrieval]\nk = 5000\n", ["retrieval.k", "less than or equal to 1000"]),              # over its maximum
    ("[warm]\nmax_seconds_behind = 0\n", ["warm.max_seconds_behind", "greater than 0"]),
    ("[planner.slice_shares.default]\nretrieved = 2\n", ["planner.slice_shares.default.retrieved", "1"]),  # nested
    ("[storage]\ndb_filename = \"../x.db\"\n", ["storage.db_filename", "plain file name"]),  # a custom check
    ("[hot]\nbudget = 3000\n", ["hot.budget", "budget_tokens"]),                 # unknown key: the section's keys
    ("hot_budget_tokens = 1\n[hot]\nbudget_tokens = 2\n", ["given twice", "hot.budget_tokens"]),  # both spellings
    ("hot = 3\n", ["[hot] must be a table"]),                                    # a section that is no table
])
def test_errors_name_the_dotted_setting(content: str, named: list[str], tmp_path: Path) -> None:
    f = write(tmp_path, content)
    res = CliRunner().invoke(cli, ["--data-dir", str(tmp_path), "config", "--check", str(f)], obj=CliState())
    assert res.exit_code == 1 and len(res.stderr.strip().splitlines()) == 1, res.output
    for part in named:
        assert part in res.stderr, (part, res.stderr)


def test_every_section_key_names_one_field() -> None:
    fields = set(Config.model_fields)
    flat = [f for keys in SECTIONS.values() for f in keys.values()]
    assert set(flat) <= fields and len(flat) == len(set(flat))  # real fields, each in one section
    assert not set(SECTIONS) & fields  # a section name is never also a field's name
    # every field has a section except the ones that are a table of their own
    assert fields - set(DOTTED) == {"pricing"}


def test_sources_of_sectioned_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = write(tmp_path, "[hot]\nbudget_tokens = 1500\n[planner.slice_shares.default]\nretrieved = 0.05\n")
    monkeypatch.setenv("TIERMEM_RETRIEVAL__K", "11")
    rows = {r["key"]: r for r in explain_sources(f, data_dir=tmp_path)}
    # (attribute path, its name in a file, value, source)
    table = [
        ("hot_budget_tokens", "hot.budget_tokens", 1500, f"file {f}"),
        ("slice_shares.default.retrieved", "planner.slice_shares.default.retrieved", 0.05, f"file {f}"),
        ("retrieval_k", "retrieval.k", 11, "env TIERMEM_RETRIEVAL__K"),
        ("pricing.input_per_mtok", "pricing.input_per_mtok", 2.5, "default"),
    ]
    for key, file_key, value, source in table:
        r = rows[key]
        assert (r["file_key"], r["value"], r["source"]) == (file_key, value, source), key
