"""`tiermem migrate-store`: `--schema` names the PostgreSQL target's schema and
`--from-schema` the PostgreSQL source's. Given for a SQLite side, either was ignored: copying
back with `--from URL --schema S --to DIR` (the forward command's spelling) read the default
schema, not S, and reported the copy verified. Now a usage error (exit 2) names the option to
use, before anything is opened or written."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tiermem.cli import cli

URL = "postgresql://nobody@127.0.0.1:1/none"  # never reached: the options are refused first


@pytest.mark.parametrize(
    "args, named, remedy",
    [
        # copying back: --schema given for the SQLite target (the reported trap)
        (["--from", URL, "--schema", "mig2", "--to", "{dir}/back"], "--schema", "--from-schema"),
        # copying forward: --from-schema given for the SQLite source
        (["--from", "{dir}/src", "--from-schema", "mig2", "--to", URL], "--from-schema", "--schema"),
        # SQLite to SQLite: neither side has a schema
        (["--from", "{dir}/src", "--schema", "s", "--to", "{dir}/back"], "--schema", "--from-schema"),
    ],
)
def test_schema_for_sqlite_side_refused(tmp_path: Path, args: list[str], named: str, remedy: str) -> None:
    argv = [a.replace("{dir}", str(tmp_path)) for a in args]
    r = CliRunner().invoke(cli, ["--data-dir", str(tmp_path / "data"), "migrate-store", *argv])
    assert r.exit_code == 2, r.output
    assert named in r.output and remedy in r.output and "SQLite" in r.output
    assert not (tmp_path / "back").exists()  # nothing opened or written
    assert not (tmp_path / "data").exists()
