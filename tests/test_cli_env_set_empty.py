"""A TIERMEM_* variable the CLI's global options read that is set but empty (an unset shell
variable in `TIERMEM_NAMESPACE="$TENANT"`) is a usage error (exit 2) naming it, as the
empty option is. click reads "" as unset: the command acted on the `default` namespace
(listed, appended to, deleted its conversations) and an empty TIERMEM_CONFIG read no
config file (review r_cli 2). TIERMEM_DATA_DIR="" was refused already (by the config)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tiermem import Config, Memory
from tiermem.cli import CliState, cli

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

# (env variable, the command; each acted on the default store before)
CASES: list[tuple[str, list[str]]] = [
    ("TIERMEM_NAMESPACE", ["conversations", "--json"]),  # listed the default namespace's
    ("TIERMEM_NAMESPACE", ["append", "mine", "--role", "user", "--content", "x"]),  # wrote into it
    ("TIERMEM_NAMESPACE", ["delete", "victim"]),  # the review's: erased the default's conversation
    ("TIERMEM_CONFIG", ["conversations", "--json"]),  # ran on defaults, no config file
]


@pytest.mark.parametrize(("var", "args"), CASES, ids=["ns-list", "ns-append", "ns-delete", "config"])
def test_an_empty_env_variable_is_refused(tmp_path: Path, var: str, args: list[str]) -> None:
    data = tmp_path / "data"
    with Memory(Config(data_dir=data), hot=False, background_indexing=False) as mem:
        mem.append("victim", {"role": "user", "content": "the default namespace's"})
    res = CliRunner().invoke(cli, ["--data-dir", str(data), *args], obj=CliState(), env={var: ""},
                             input="y\n")
    assert res.exit_code == 2, res.output
    assert var in res.stderr and "empty" in res.stderr, res.stderr
    with Memory(Config(data_dir=data), hot=False, background_indexing=False) as mem:
        assert mem.conversations() == ["victim"]


def test_a_set_namespace_still_acts(tmp_path: Path) -> None:
    data = tmp_path / "data"
    res = CliRunner().invoke(cli, ["--data-dir", str(data), "append", "mine", "--role", "user", "--content", "x"],
                             obj=CliState(), env={"TIERMEM_NAMESPACE": "acme"})
    assert res.exit_code == 0, res.output
    with Memory(Config(data_dir=data), hot=False, background_indexing=False) as mem:
        assert mem.conversations("acme") == ["mine"]
        assert mem.conversations() == []
