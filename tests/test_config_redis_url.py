"""`redis_url` is checked when the config is built (tiers.redis_url, the parser the Redis
client uses), so a URL the hot tier cannot open fails at startup naming the field.

On the code before (audit_hot, finding 4) any string passed: `tiermem config --check`
said the config was fine, and the commands then failed (or ran degraded) with redis-py's
message, which names no setting. An empty string is refused like `cold_url`'s: unset
(None) is what means "the embedded redis-server".
"""

from __future__ import annotations

from pathlib import Path

import pydantic
import pytest
from click.testing import CliRunner

from tiermem import Config
from tiermem.cli import CliState, cli

# refused, each with a word the message must say
REFUSED = [
    pytest.param("", "unset", id="empty"),  # unset is None, not ''
    pytest.param("   ", "unset", id="blank"),
    pytest.param("http://localhost:6379", "scheme 'http'", id="http-scheme"),
    pytest.param("localhost:6379", "scheme", id="no-scheme"),
    pytest.param("redis://localhost:notaport", "port", id="port-not-an-int"),
    pytest.param("redis://localhost:99999", "port", id="port-out-of-range"),
    pytest.param("redis://localhost:0", "port", id="port-zero"),
    pytest.param("unix://", "path", id="unix-without-a-path"),
    pytest.param("unix+cluster:///tmp/r.sock", "Cluster", id="cluster-over-unix"),
    pytest.param("unix:///tmp/r.sock?cluster=1", "Cluster", id="cluster-flag-over-unix"),
]

# accepted, as the client reads them (tiers.hot.make_client)
ACCEPTED = [
    pytest.param("redis://localhost:6379/0", id="redis"),
    pytest.param("rediss://user:pw@cache.example:6380", id="rediss-with-auth"),
    pytest.param("REDIS://localhost", id="upper-case-scheme"),
    pytest.param("unix:///run/redis/redis.sock?db=2", id="unix"),
    pytest.param("redis+cluster://10.0.0.1:7000", id="cluster-scheme"),
    pytest.param("rediss://10.0.0.1:7000?cluster=yes", id="cluster-flag"),
]


@pytest.mark.parametrize(("url", "says"), REFUSED)
def test_a_bad_url_is_refused_naming_the_field(tmp_path: Path, url: str, says: str) -> None:
    with pytest.raises(pydantic.ValidationError) as info:
        Config(data_dir=tmp_path / "data", redis_url=url)
    (err,) = info.value.errors()
    assert err["loc"] == ("redis_url",) and says in err["msg"]


@pytest.mark.parametrize("url", ACCEPTED)
def test_a_good_url_is_accepted(tmp_path: Path, url: str) -> None:
    assert Config(data_dir=tmp_path / "data", redis_url=url).redis_url == url


def test_config_check_names_the_field(tmp_path: Path) -> None:
    f = tmp_path / "tiermem.toml"
    f.write_text('[hot]\nredis_url = "redis://:hunter2@localhost:notaport"\n')
    res = CliRunner().invoke(cli, ["--data-dir", str(tmp_path), "config", "--check", str(f)], obj=CliState())
    assert res.exit_code == 1 and "hot.redis_url" in res.stderr and "port" in res.stderr, res.output
    assert "hunter2" not in res.output  # the password is not printed
