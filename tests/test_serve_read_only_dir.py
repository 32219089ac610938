"""`tiermem serve` on a data dir this process cannot write starts, as `mcp` and the read
commands do, and says how it is: the embedded Redis cannot prepare its directory, so the
hot tier is off with a warning, `/healthz` answers 200 "degraded" with the cold tier
"read-only" and the hot tier "down" (the error's type as the reason), reads answer, and
writes answer what the README documents for read-only storage: 503, `Retry-After: 30`,
`"written": false`. Before, serve refused to start: "error: storage is read-only ...
nothing was written" from the Redis launch lock (EACCES), exit 1.

Real console script under setpriv without root's DAC capabilities (`unprivileged`) on a
chmod a-w data dir, a real port, a real Redis that populated it first."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from ports import free_port
from unprivileged import as_unprivileged, unwritable

from tiermem import Config, Memory
from tiermem.tiers.redis_server import EmbeddedRedis

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

TIERMEM = str(Path(sys.executable).with_name("tiermem"))
CONV = "ro-1"
START_TIMEOUT_S = 120
STOP_TIMEOUT_S = 60
REQUEST_TIMEOUT_S = 60
STORAGE_RETRY_AFTER_S = 30  # the README's "503 with Retry-After: 30: the database is read-only"


def digest(data: Path) -> dict[str, str]:
    return {str(p.relative_to(data)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(data.rglob("*")) if p.is_file()}


def wait_for_health(proc: subprocess.Popen[str], url: str) -> httpx.Response:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if proc.poll() is not None:
            _out, err = proc.communicate()
            pytest.fail(f"serve exited {proc.returncode} before answering: {err[-2000:]}")
        try:
            return httpx.get(f"{url}/healthz", timeout=5)
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "serve did not answer /healthz"
        time.sleep(0.2)


def test_serve_on_a_read_only_data_dir_answers_reads_and_refuses_writes(tmp_path: Path) -> None:
    data = tmp_path / "data"
    # the review's data dir: written with the embedded Redis, which was then stopped
    with Memory(Config(data_dir=data), background_indexing=False) as mem:
        mem.append(CONV, {"role": "user", "content": "the vault code is 7-4-1"})
        mem.append(CONV, {"role": "assistant", "content": "noted"})
    EmbeddedRedis(data).stop()
    before = digest(data)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERMEM_")}
    with unwritable(data):
        proc = subprocess.Popen([*as_unprivileged(), TIERMEM, "--data-dir", str(data), "serve", "--no-auth",
                                 "--port", str(port), "--log-level", "warning"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        try:
            health = wait_for_health(proc, url)
            assert health.status_code == 200, health.text
            body = health.json()
            assert body["status"] == "degraded", body
            assert {k: body["tiers"][k] for k in ("cold", "hot")} == {"cold": "read-only", "hot": "down"}, body
            assert "PermissionError" in body["reasons"]["hot"], body  # the type only: no path on an open route
            with httpx.Client(base_url=url, timeout=REQUEST_TIMEOUT_S) as http:
                r = http.get(f"/v1/conversations/{CONV}/history")
                assert r.status_code == 200, r.text
                assert [m["message"]["content"] for m in r.json()["messages"]] == ["the vault code is 7-4-1", "noted"]
                r = http.post(f"/v1/conversations/{CONV}/context", json={"query": "vault", "budget": 300})
                assert r.status_code == 200, r.text
                r = http.get("/v1/stats")
                assert r.status_code == 200 and r.json()["hot"]["healthy"] is False, r.text
                # a write: refused before writing, safe to send again (README: read-only storage)
                r = http.post(f"/v1/conversations/{CONV}/messages", json={"role": "user", "content": "refused"})
                assert r.status_code == 503, (r.status_code, r.text)
                assert r.headers["retry-after"] == str(STORAGE_RETRY_AFTER_S)
                assert r.json()["written"] is False and "read-only" in r.json()["detail"], r.text
            proc.send_signal(signal.SIGTERM)
            _out, err = proc.communicate(timeout=STOP_TIMEOUT_S)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert "Traceback" not in err, err[-2000:]
    assert "warning: hot tier unavailable" in err, err[-2000:]
    assert digest(data) == before  # nothing written, Redis's files included
