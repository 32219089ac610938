"""`tiermem config --export` names in its header only the sources its values came from,
in precedence order (arguments, env variables by name, the file, defaults). Before, it
always said `(source: defaults, env, --data-dir)`, or the file's path for `defaults`,
whether or not a variable or --data-dir set anything (review r_ops, 2026-12-07)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tiermem.cli import CliState, cli

pytestmark = pytest.mark.usefixtures("clean_env")

TAIL = "; load with tiermem --config FILE or env TIERMEM_CONFIG=FILE"


# (global options, env variables, a config file's text or None, the header's sources);
# "{d}" is the test's data dir, "{conf}" the file
CASES = [
    # nothing but --data-dir: no env, no file
    (["--data-dir", "{d}"], {}, None, "--data-dir, defaults"),
    # the data dir from its variable, not the option
    ([], {"TIERMEM_DATA_DIR": "{d}"}, None, "env TIERMEM_DATA_DIR, defaults"),
    # a file and a variable, no --data-dir: the variable named, the file's path, no --data-dir
    (["--config", "{conf}"], {"TIERMEM_MAX_CONTENT_BYTES": "5000"}, 'data_dir = "{d}"\n',
     "env TIERMEM_MAX_CONTENT_BYTES, file {conf}, defaults"),
    # a file only
    (["--config", "{conf}"], {}, 'data_dir = "{d}"\n', "file {conf}, defaults"),
]


@pytest.mark.parametrize(("options", "env", "toml", "sources"), CASES,
                         ids=["data-dir-only", "data-dir-env", "file-and-env", "file-only"])
def test_the_export_header_names_the_sources_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  options: list[str], env: dict[str, str], toml: str | None,
                                                  sources: str) -> None:
    conf = tmp_path / "c.toml"
    fill = {"d": str(tmp_path / "data"), "conf": str(conf)}
    if toml is not None:
        conf.write_text(toml.format(**fill))
    for name, value in env.items():
        monkeypatch.setenv(name, value.format(**fill))
    out = CliRunner().invoke(cli, [*(o.format(**fill) for o in options), "config", "--export", "-"],
                             obj=CliState())
    assert out.exit_code == 0, out.output
    assert out.output.splitlines()[0] == f"# tiermem config --export (sources: {sources.format(**fill)}){TAIL}"
