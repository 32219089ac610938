"""`tiermem tune --write-config` leaves the base config's secrets out and writes 0600.

The best candidate's file is the base config with the grid values over it: it copied
bearer tokens (`auth_tokens`, `metrics_tokens`) and the password of `cold_url` into a
file written with the umask's 0644, readable by every local user. It now leaves them
out unless `--with-secrets` asks (as `config --export` does, through the same
`leave_out_secrets`), names them in the file's header and on stderr, and writes the file
0600, replaced whole (`_replacing`), even over an existing 0644 one.
"""

from __future__ import annotations

import os
import stat
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner
from convo_fixtures import support_lines, write_jsonl
from hash_embedder import HashEmbedder
from pg_server import fresh_schema

from tiermem.cli import CliState, cli
from tiermem.config import Config

TOKEN = "SUPERSECRET-token-0123456789"
METRICS_TOKEN = "METRICSSECRET-0123456789abc"
PASSWORD = "PGPASSWORD123"
SECRETS = (TOKEN, METRICS_TOKEN, PASSWORD)
WIDE_FILE_MODE = 0o644  # what write_text gave it under the usual umask 022

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in


def _with_password(url: str) -> str:
    """`url` with PASSWORD as its password (the test server trusts local users: it is
    accepted and unused), so that the tune run really uses that cold store."""
    scheme, rest = url.split("://", 1)
    userinfo, host = rest.rsplit("@", 1) if "@" in rest else ("postgres", rest)
    user = userinfo.split(":", 1)[0]
    return f"{scheme}://{user}:{PASSWORD}@{host}"


@pytest.mark.parametrize("with_secrets", [
    False,  # the default: every secret left out and named
    True,  # asked for: kept, and the file is still private
])
def test_best_config_leaves_secrets_out_and_is_private(tmp_path: Path, pg_url: str, with_secrets: bool) -> None:
    data = write_jsonl(tmp_path / "support.jsonl", support_lines())
    base = tmp_path / "base.toml"
    cold_url = _with_password(pg_url)
    base.write_text(f'hot_budget_tokens = 3000\n'
                    f'[storage]\ncold_url = "{cold_url}"\ncold_schema = "{fresh_schema()}"\n'
                    f'[service]\nmetrics_tokens = ["{METRICS_TOKEN}"]\n'
                    f'[service.auth_tokens]\n"{TOKEN}" = "acme"\n')
    best = tmp_path / "best.toml"
    best.write_text("# an earlier run's file, readable by all\n")
    os.chmod(best, WIDE_FILE_MODE)
    args = ["--data-dir", str(tmp_path / "d"), "tune", str(data), "--budgets", "500", "--config", str(base),
            "--write-config", str(best)]
    res = CliRunner().invoke(cli, args + (["--with-secrets"] if with_secrets else []),
                             obj=CliState(embedder=HashEmbedder()), catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert stat.S_IMODE(best.stat().st_mode) == 0o600
    text = best.read_text()
    loaded = Config.load(best)
    assert loaded.hot_budget_tokens == 3000  # the rest of the base is there
    assert not list(tmp_path.glob(".best.toml.*"))  # no temporary left beside it
    if with_secrets:
        assert all(s in text for s in SECRETS)
        assert loaded.auth_tokens == {TOKEN: "acme"} and loaded.cold_url == cold_url
        return
    for secret in SECRETS:
        assert secret not in text and secret not in res.output
    assert loaded.auth_tokens == {} and loaded.metrics_tokens == [] and loaded.cold_url is None
    raw = tomllib.loads(text)
    assert raw["storage"]["cold_schema"]  # only the secrets go, not their section's other settings
    left_out = "auth_tokens, cold_url, metrics_tokens"
    assert f"left out (secrets; --with-secrets includes them): {left_out}" in text
    assert f"left out {left_out}" in res.stderr
