"""A Redis that refuses tiermem itself (a wrong or missing password: WRONGPASS, NOAUTH;
an ACL user without a command the hot tier needs: NOPERM) is a misconfiguration, found
when the Memory opens, on a real redis-server with `requirepass` (and ACL users): one
ERROR naming `redis_url` with its password redacted and Redis's reply, stats and
/healthz show the hot tier down with that reason (no secret in either), and everything
still works, served from the log. Opening never fails for Redis: one that is not there
degrades as before.

On the code before, nothing was found at start: stats said healthy with no
`last_error` until the first call, which then degraded with a warning as in an outage
(or, for NOPERM inside a script, an ERROR with a traceback on every call).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from hot_fixtures import TcpRedis, free_cluster_ports, tcp_redis

from tiermem import Config, Memory
from tiermem.service.app import create_app
from tiermem.tiers.embed import Embedder
from tiermem.tiers.redis_url import REDACTED

PASSWORD = "s3cret-admin-pw"
WRONG = "not-the-pw-9f1c"  # must appear nowhere tiermem writes
USER_PASSWORD = "user-pw-7d2e"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[TcpRedis]:
    with tcp_redis(tmp_path / "redis", password=PASSWORD) as srv:
        admin = srv.admin(PASSWORD)
        # an ACL user that may do everything but run scripts; one that may not SETRANGE
        admin.execute_command("ACL", "SETUSER", "noscripts", "on", f">{USER_PASSWORD}", "~*", "+@all", "-eval",
                              "-evalsha")
        admin.execute_command("ACL", "SETUSER", "nosetrange", "on", f">{USER_PASSWORD}", "~*", "+@all",
                              "-setrange")
        admin.close()
        yield srv


def _url(server: TcpRedis, userinfo: str) -> str:
    return f"redis://{userinfo}127.0.0.1:{server.port}"


CASES = [
    pytest.param(f":{WRONG}@", "invalid username-password", id="wrong-password"),  # WRONGPASS
    pytest.param("", "authenticated", id="no-password"),  # NOAUTH
    pytest.param(f"noscripts:{USER_PASSWORD}@", "eval", id="user-without-eval"),  # NOPERM on EVALSHA
    pytest.param(f"nosetrange:{USER_PASSWORD}@", "can't run this command", id="user-without-setrange"),  # in a script
]


@pytest.mark.parametrize(("userinfo", "reply"), CASES)
def test_found_at_start_reported_once_and_served_from_the_log(
        tmp_path: Path, server: TcpRedis, embedder: Embedder, caplog: pytest.LogCaptureFixture,
        userinfo: str, reply: str) -> None:
    url = _url(server, userinfo)
    with caplog.at_level(logging.WARNING, logger="tiermem"), \
            Memory(Config(data_dir=tmp_path / "data", redis_url=url), embedder=embedder,
                   background_indexing=False) as mem:
        errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert len(errors) == 1, [r.getMessage() for r in caplog.records]
        line = errors[0].getMessage()
        assert errors[0].name == "tiermem.hot" and reply in line and f"127.0.0.1:{server.port}" in line, line
        if userinfo:
            assert REDACTED in line
        hot = mem.stats()["hot"]
        assert hot["healthy"] is False and reply in hot["misconfigured"], hot
        # still works, from the log
        mem.append("c", {"role": "user", "content": "the gate is B12"})
        ctx = mem.context("c", "which gate?", 300)
        assert ctx.plan.degraded and "the gate is B12" in str(ctx.messages)
        mem.append("c", {"role": "user", "content": "boarding at nine"})
        mem.context("c", "when?", 300)
        assert mem.hot is not None and mem.hot.counters()["healthy"] is False
        said = json.dumps(mem.stats(), default=str)
    records = [r for r in caplog.records if r.name.startswith("tiermem")]
    assert [r.levelno for r in records] == [logging.ERROR], [r.getMessage() for r in records]  # once
    for text in (said, *(r.getMessage() for r in caplog.records)):
        assert USER_PASSWORD not in text and WRONG not in text and PASSWORD not in text


def test_healthz_says_the_hot_tier_is_down_and_why(tmp_path: Path, server: TcpRedis) -> None:
    cfg = Config(data_dir=str(tmp_path / "data"), redis_url=_url(server, f":{WRONG}@"))
    app = create_app(cfg, auth=False, start_scheduler=False)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        res = client.get("/healthz")
    body = res.json()
    assert res.status_code == 200 and body["tiers"]["hot"] == "down", body  # served from the log meanwhile
    assert "invalid username-password" in body["reasons"]["hot"], body
    assert WRONG not in res.text and str(server.port) not in res.text


def test_the_right_password_is_healthy_from_the_start(tmp_path: Path, server: TcpRedis, embedder: Embedder) -> None:
    with Memory(Config(data_dir=tmp_path / "data", redis_url=_url(server, f":{PASSWORD}@")), embedder=embedder,
                background_indexing=False) as mem:
        hot = mem.stats()["hot"]
        assert hot["healthy"] is True and hot["misconfigured"] is None and hot["last_error"] is None, hot
        mem.append("c", {"role": "user", "content": "hello"})
        assert not mem.context("c", "hello?", 300).plan.degraded


def test_a_redis_not_there_at_start_degrades_as_before(tmp_path: Path, embedder: Embedder,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    url = f"redis://127.0.0.1:{free_cluster_ports(1)[0]}"  # nobody listens
    with caplog.at_level(logging.WARNING, logger="tiermem"), \
            Memory(Config(data_dir=tmp_path / "data", redis_url=url), embedder=embedder,
                   background_indexing=False) as mem:
        mem.append("c", {"role": "user", "content": "hello"})
        assert mem.context("c", "hello?", 300).plan.degraded
        hot = mem.stats()["hot"]
        assert hot["healthy"] is False and hot["misconfigured"] is None, hot
    assert all(r.levelno == logging.WARNING for r in caplog.records if r.name.startswith("tiermem")), \
        [r.getMessage() for r in caplog.records]
