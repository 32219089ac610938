"""DNS rebinding: a service bound to loopback answers only requests addressed to a local
name, on every path but /healthz.

A web page whose DNS name is rebound to 127.0.0.1 sends its own name in `Host` (and its
origin in `Origin`). Before the fix only /v1/mcp (the mcp package's own check) refused it;
/v1/*, /ui, /docs and /metrics served it, so under `--no-auth` such a page read and erased
every namespace, and with `metrics_public` it read /metrics (its requests come from a
loopback address). Invariants checked here, on a real uvicorn:

- loopback `http_host`: a Host other than 127.0.0.1 / localhost / [::1] (any port) or a
  name in `http_allowed_hosts` is refused 421, and an `Origin` of another host 403,
  before anything else is read or done; /healthz answers every Host (probes);
- another `http_host` (a deployment behind a proxy or in a container): Host is checked
  only when `http_allowed_hosts` names the hosts;
- `http_allowed_hosts` holds host names or addresses only (no scheme, port or path).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pydantic
import pytest
from edge_server import edge_server

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder

TOKEN = "tok-acme-0123456789abcdef"
SECRET = "rebinding-canary-4711"
EVIL = "attacker.example"
# every path family a rebound page could read or act through
PATHS = ["/v1/conversations", "/v1/stats", "/ui/", "/ui/metrics", "/docs", "/openapi.json", "/metrics"]


def _memory(root: Path, embedder: FastEmbedder, **cfg: object) -> tuple[Config, Memory]:
    config = Config(data_dir=root / "data", **cfg)  # type: ignore[arg-type]
    mem = Memory(config, embedder=embedder, hot=False, background_indexing=False)
    mem.append("diary", {"role": "user", "content": SECRET}, namespace="default")
    return config, mem


@pytest.fixture(scope="module")
def no_auth(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[tuple[str, int, Memory]]:
    """What `tiermem serve --no-auth` builds (loopback http_host, the default)."""
    config, mem = _memory(tmp_path_factory.mktemp("noauth"), embedder)
    with mem, edge_server(config, mem, auth=False) as (url, port):
        yield url, port, mem


@pytest.mark.parametrize("path", PATHS)
def test_a_rebound_name_is_refused(no_auth: tuple[str, int, Memory], path: str) -> None:
    url, port, _mem = no_auth
    r = httpx.get(url + path, headers={"Host": f"{EVIL}:{port}"})
    assert r.status_code == 421, (path, r.status_code, r.text[:200])
    assert SECRET not in r.text


def test_a_rebound_page_cannot_erase(no_auth: tuple[str, int, Memory]) -> None:
    url, port, mem = no_auth
    r = httpx.request("DELETE", url + "/v1/namespace", headers={"Host": f"{EVIL}:{port}",
                                                                "X-Tiermem-Namespace": "default"})
    assert r.status_code == 421
    assert mem.conversations("default") == ["diary"]


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "[::1]:{port}", "localhost", "LOCALHOST:{port}"])
def test_local_names_are_served(no_auth: tuple[str, int, Memory], host: str) -> None:
    url, port, _mem = no_auth
    r = httpx.get(url + "/v1/conversations", headers={"Host": host.format(port=port)})
    assert r.status_code == 200 and r.json()["conversations"] == ["diary"]


# (Origin, status): a page of another origin is refused even with a local Host
ORIGINS = [
    (f"http://{EVIL}", 403),
    (f"http://{EVIL}:8080", 403),
    ("null", 403),  # sandboxed frames and file:// pages
    ("http://127.0.0.1.attacker.example", 403),
    ("http://localhost:3000", 200),  # a local page (a dev server)
    ("http://[::1]:9000", 200),
]


@pytest.mark.parametrize(("origin", "status"), ORIGINS)
def test_origin_of_another_host_is_refused(no_auth: tuple[str, int, Memory], origin: str, status: int) -> None:
    url, _port, _mem = no_auth
    r = httpx.get(url + "/v1/conversations", headers={"Origin": origin})
    assert r.status_code == status, r.text[:200]


def test_healthz_answers_any_host(no_auth: tuple[str, int, Memory]) -> None:
    # liveness probes name the pod's address or a service name; /healthz holds no data
    url, port, _mem = no_auth
    assert httpx.get(url + "/healthz", headers={"Host": f"{EVIL}:{port}"}).status_code == 200


def test_public_metrics_are_not_served_to_a_rebound_name(tmp_path: Path, embedder: FastEmbedder) -> None:
    # metrics_public trusts a loopback client address, which a rebound page has
    config, mem = _memory(tmp_path, embedder, auth_tokens={TOKEN: "acme"}, metrics_public=True)
    with mem, edge_server(config, mem) as (url, port):
        evil = httpx.get(url + "/metrics", headers={"Host": f"{EVIL}:{port}", "Origin": f"http://{EVIL}:{port}"})
        assert evil.status_code == 421 and "tiermem_messages" not in evil.text
        assert httpx.get(url + "/metrics").status_code == 200  # the scraper on this host


def test_allowed_hosts_behind_a_local_proxy(tmp_path: Path, embedder: FastEmbedder) -> None:
    # nginx on the same host passing the public name through: that name is served too
    config, mem = _memory(tmp_path, embedder, auth_tokens={TOKEN: "acme"},
                          http_allowed_hosts=["mem.example.com"])
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with mem, edge_server(config, mem) as (url, port):
        ok = httpx.get(url + "/v1/stats", headers={**auth, "Host": "mem.example.com",
                                                   "Origin": "https://mem.example.com"})
        assert ok.status_code == 200, ok.text
        assert httpx.get(url + "/v1/stats", headers={**auth, "Host": f"127.0.0.1:{port}"}).status_code == 200
        assert httpx.get(url + "/v1/stats", headers={**auth, "Host": EVIL}).status_code == 421


def test_another_bind_address_checks_only_named_hosts(tmp_path: Path, embedder: FastEmbedder) -> None:
    # http_host 0.0.0.0 (a container behind a proxy): whatever Host the proxy sends is
    # served, unless http_allowed_hosts names the hosts
    auth = {"Authorization": f"Bearer {TOKEN}"}
    config, mem = _memory(tmp_path / "open", embedder, auth_tokens={TOKEN: "acme"}, http_host="0.0.0.0")
    with mem, edge_server(config, mem) as (url, _port):
        assert httpx.get(url + "/v1/stats", headers={**auth, "Host": "mem.internal:8080"}).status_code == 200
    config, mem = _memory(tmp_path / "named", embedder, auth_tokens={TOKEN: "acme"}, http_host="0.0.0.0",
                          http_allowed_hosts=["mem.internal", "10.0.0.5"])
    with mem, edge_server(config, mem) as (url, _port):
        for host, status in (("mem.internal:8080", 200), ("10.0.0.5", 200), ("localhost", 200), (EVIL, 421)):
            r = httpx.get(url + "/v1/stats", headers={**auth, "Host": host})
            assert r.status_code == status, (host, r.text[:200])


@pytest.mark.parametrize("bad", ["http://mem.example.com", "mem.example.com:443", "mem.example.com/ui", "", "*",
                                 "a b"])
def test_allowed_hosts_are_host_names(tmp_path: Path, bad: str) -> None:
    with pytest.raises(pydantic.ValidationError, match="http_allowed_hosts"):
        Config(data_dir=tmp_path, http_allowed_hosts=[bad])
