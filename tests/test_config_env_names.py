"""A TIERMEM_* environment variable that names no setting is refused, naming the variable
(with the setting it was probably meant to be), as an unknown key of a section already was.
The variables that are not settings (tiermem.config.NON_SETTING_ENV: the config file's path,
the CLI's namespace, the eval data, compose's password, the test suite's knobs) and the
one `llm_api_key_env` names are left alone. Before (audit_input2, finding 9) a misspelt
flat name, `TIERMEM_HOT_BUDGET_TOKEN=10`, was silently ignored: the setting kept its
default."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pydantic
import pytest
from click.testing import CliRunner

from tiermem import Config
from tiermem.cli import CliState, cli
from tiermem.config import NON_SETTING_ENV
from tiermem.config_sections import SECTIONS

pytestmark = pytest.mark.usefixtures("clean_env")
REPO = Path(__file__).resolve().parent.parent

# (the variable, what the error must also say) -- each named no setting and was ignored
REFUSED = [
    ("TIERMEM_HOT_BUDGET_TOKEN", "did you mean TIERMEM_HOT_BUDGET_TOKENS"),  # the audit's: a letter short
    ("tiermem_hot_budget_token", "did you mean TIERMEM_HOT_BUDGET_TOKENS"),  # env names are case-insensitive
    ("TIERMEM_RETRIEVALK", "did you mean TIERMEM_RETRIEVAL_K"),  # an underscore short
    ("TIERMEM_HOT", "no such setting"),  # a section is no setting of its own
    ("TIERMEM_NO_SUCH_THING", "no such setting"),
]


@pytest.mark.parametrize(("name", "says"), REFUSED)
def test_an_env_name_of_no_setting_is_refused_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        name: str, says: str) -> None:
    monkeypatch.setenv(name, "10")
    with pytest.raises(pydantic.ValidationError) as info:
        Config(data_dir=tmp_path / "data")
    (err,) = info.value.errors()
    assert err["loc"] == (name,) and err["type"] == "unknown_setting" and says in str(info.value)


# (the variable, its value) -- settings, however named: never refused
SETTINGS = [
    ("TIERMEM_HOT_BUDGET_TOKENS", "3000"),  # flat
    ("TIERMEM_HOT__BUDGET_TOKENS", "3000"),  # sectioned
    ("TIERMEM_SLICE_SHARES__DEFAULT__RETRIEVED", "0.05"),  # nested
    ("TIERMEM_PLANNER__SLICE_SHARES__NEW_SUBTASK__RETRIEVED", "0.05"),  # sectioned and nested
    ("tiermem_retrieval_k", "5"),  # lower case
]


@pytest.mark.parametrize(("name", "value"), SETTINGS)
def test_settings_are_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    monkeypatch.setenv(name, value)
    Config(data_dir=tmp_path / "data")


@pytest.mark.parametrize("name", sorted(NON_SETTING_ENV))
def test_the_variables_that_are_not_settings_are_left_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            name: str) -> None:
    monkeypatch.setenv(name, "x")
    if name == "TIERMEM_CONFIG":
        (tmp_path / "c.toml").write_text("retrieval_k = 5\n")
        monkeypatch.setenv(name, str(tmp_path / "c.toml"))
    Config(data_dir=tmp_path / "data")


def test_the_llm_key_variable_is_left_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIERMEM_LLM_KEY", "sk-test")
    Config(data_dir=tmp_path / "data", llm_api_key_env="TIERMEM_LLM_KEY")
    with pytest.raises(pydantic.ValidationError, match="TIERMEM_LLM_KEY"):
        Config(data_dir=tmp_path / "data")  # not when the key is read from another variable


def test_every_tiermem_name_the_repository_uses_is_known() -> None:
    """A new TIERMEM_* variable (a test knob, a compose file's) must be a setting or be added
    to NON_SETTING_ENV, or every Config built where it is set is refused."""
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    # the wrong names this file (and comments citing the audit) use on purpose
    # (TIERMEM_SCHEDULER: a section given as one JSON variable, refused on purpose by
    # test_config_typed_booleans)
    deliberate = {n.upper() for n, _ in REFUSED} | {"TIERMEM_LLM_KEY", "TIERMEM_SCHEDULER"}
    unknown: dict[str, str] = {}
    for f in files:
        try:
            text = (REPO / f).read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for name in re.findall(r"\bTIERMEM_[A-Za-z0-9_]*[A-Za-z0-9]", text):
            parts = name[len("TIERMEM_"):].lower().split("__")
            if parts[0] in Config.model_fields or (parts[0] in SECTIONS and len(parts) > 1):
                continue
            if name.upper() not in NON_SETTING_ENV | deliberate:
                unknown.setdefault(name, f)
    assert unknown == {}


def test_the_cli_refuses_it(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["--data-dir", str(tmp_path / "data"), "config", "--json"], obj=CliState(),
                             env={"TIERMEM_HOT_BUDGET_TOKEN": "10"})
    assert res.exit_code == 1 and "TIERMEM_HOT_BUDGET_TOKEN" in res.stderr and "Traceback" not in res.output, \
        res.output
