"""compose.yaml, compose.cluster.yaml and the Dockerfile, checked without Docker: services,
ports, volumes, health checks, and every TIERMEM_* variable against `Config` (the name
is a field, and the values, interpolated as compose would, validate)."""

from __future__ import annotations

import json
import re
import shlex
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from tiermem.config import Config
from tiermem.service import TokenAuth

ROOT = Path(__file__).resolve().parent.parent
TOKENS = {"compose-test-token-0123456789": "acme"}
PG_PASSWORD = "compose-test-password-0123456789"
SHELL_ENV = {"TIERMEM_AUTH_TOKENS": json.dumps(TOKENS), "TIERMEM_PG_PASSWORD": PG_PASSWORD}

_VAR = re.compile(
    r"\$(?:\$|\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?P<op>:?[-?])?(?P<arg>[^}]*)\}"
    r"|(?P<plain>[A-Za-z_][A-Za-z0-9_]*))"
)


def interpolate(value: str, env: Mapping[str, str]) -> str:
    """Compose's variable interpolation: $$, $VAR, ${VAR}, ${VAR:-default}, ${VAR-default},
    ${VAR:?error}, ${VAR?error}."""

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group("braced") or m.group("plain")
        op, arg = m.group("op"), m.group("arg") or ""
        current = env.get(name)
        unset_or_empty = current is None or (op is not None and op.startswith(":") and current == "")
        if op in (":-", "-"):
            return arg if unset_or_empty else str(current)
        if op in (":?", "?"):
            if unset_or_empty:
                raise KeyError(f"{name}: {arg}")
            return str(current)
        return current or ""

    return _VAR.sub(sub, value)


def load(name: str) -> dict[str, Any]:
    doc = yaml.safe_load((ROOT / name).read_text())
    assert isinstance(doc, dict)
    return doc


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment", {})
    if isinstance(env, list):  # the "KEY=value" form
        env = dict(item.split("=", 1) for item in env)
    return {str(k): interpolate(str(v), SHELL_ENV) for k, v in env.items()}


def config_from(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Config:
    for key in [k for k in __import__("os").environ if k.startswith("TIERMEM_")]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return Config.load()


def check_tiermem_env(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Config:
    assert env, "no environment"
    for key in env:
        assert key.startswith("TIERMEM_"), key
        field = key.removeprefix("TIERMEM_").lower().split("__")[0]
        assert field in Config.model_fields, f"{key} names no Config field"
    cfg = config_from(env, monkeypatch)
    assert cfg.data_dir == Path("/data")
    assert cfg.http_host == "0.0.0.0"
    # published on every interface for a TLS proxy this file cannot name: the inspector's
    # token cookie must be Secure whatever the proxy's address (91338f2)
    assert cfg.ui_cookie_secure == "always"
    assert cfg.http_port == 8080
    assert cfg.auth_tokens == TOKENS
    TokenAuth(cfg.auth_tokens, enabled=True, default_namespace="default", max_id_chars=cfg.max_id_chars)
    return cfg


def test_interpolation_helper() -> None:
    env = {"A": "1", "E": ""}
    assert interpolate("x$$y", env) == "x$y"
    assert interpolate("${A}-$A-${B:-two}-${E:-three}-${E-four}", env) == "1-1-two-three-"
    with pytest.raises(KeyError, match="B: needed"):
        interpolate("${B:?needed}", env)
    with pytest.raises(KeyError):
        interpolate("${E:?needed}", env)


def test_compose_services_ports_volumes(monkeypatch: pytest.MonkeyPatch) -> None:
    doc = load("compose.yaml")
    services = doc["services"]
    assert set(services) == {"redis", "tiermem"}
    assert services["redis"]["image"] == "redis:7"
    assert "ports" not in services["redis"], "Redis must not be published on the host"
    assert "redis-cli" in services["redis"]["healthcheck"]["test"]

    app = services["tiermem"]
    build = app["build"]
    context = ROOT / (build["context"] if isinstance(build, dict) else build)
    dockerfile = context / (
        build.get("dockerfile", "Dockerfile") if isinstance(build, dict) else "Dockerfile"
    )
    assert dockerfile.is_file()
    assert app["depends_on"]["redis"]["condition"] == "service_healthy"

    cfg = check_tiermem_env(environment(app), monkeypatch)
    url = urllib.parse.urlsplit(cfg.redis_url or "")
    assert url.scheme == "redis" and url.hostname in services and url.port == 6379

    assert f"8080:{cfg.http_port}" in [str(p) for p in app["ports"]]
    mounts = [str(v).split(":") for v in app["volumes"]]
    assert [m[1] for m in mounts] == [str(cfg.data_dir)]
    assert mounts[0][0] in doc["volumes"], "the data dir is a named volume"

    health = " ".join(app["healthcheck"]["test"])
    assert f"127.0.0.1:{cfg.http_port}/healthz" in health


def test_compose_refuses_to_start_without_tokens() -> None:
    raw = load("compose.yaml")["services"]["tiermem"]["environment"]["TIERMEM_AUTH_TOKENS"]
    with pytest.raises(KeyError, match="TIERMEM_AUTH_TOKENS"):
        interpolate(raw, {})


def check_postgres(services: dict[str, Any], doc: dict[str, Any]) -> dict[str, str]:
    """The PostgreSQL service: pgvector's image, not published, a named volume at the
    directory PostgreSQL 18 images keep PGDATA under, a pg_isready health check, and a
    password compose refuses to start without. Returns its interpolated environment."""
    pg = services["postgres"]
    assert pg["image"].startswith("pgvector/pgvector:pg")
    assert "ports" not in pg, "PostgreSQL must not be published on the host"
    mounts = [str(v).split(":") for v in pg["volumes"]]
    assert [m[1] for m in mounts] == ["/var/lib/postgresql"] and mounts[0][0] in doc["volumes"]
    assert "pg_isready" in pg["healthcheck"]["test"]
    with pytest.raises(KeyError, match="TIERMEM_PG_PASSWORD"):
        interpolate(pg["environment"]["POSTGRES_PASSWORD"], {})
    return environment(pg)


def check_cold_url(cfg: Config, pg_env: dict[str, str], services: dict[str, Any]) -> None:
    url = urllib.parse.urlsplit(cfg.cold_url or "")
    assert url.scheme == "postgresql" and url.hostname == "postgres" and url.hostname in services
    assert url.port == 5432
    assert (url.username, url.password, url.path.lstrip("/")) == (
        pg_env["POSTGRES_USER"], pg_env["POSTGRES_PASSWORD"], pg_env["POSTGRES_DB"])
    assert cfg.cold_schema == "tiermem"


def test_postgres_variant(monkeypatch: pytest.MonkeyPatch) -> None:
    doc = load("compose.postgres.yaml")
    services = doc["services"]
    assert set(services) == {"postgres", "redis", "tiermem"}
    pg_env = check_postgres(services, doc)
    app = services["tiermem"]
    assert app["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert app["depends_on"]["redis"]["condition"] == "service_healthy"
    cfg = check_tiermem_env(environment(app), monkeypatch)
    check_cold_url(cfg, pg_env, services)
    url = urllib.parse.urlsplit(cfg.redis_url or "")
    assert url.scheme == "redis" and url.hostname in services
    assert "8080:8080" in app["ports"]
    with pytest.raises(KeyError, match="TIERMEM_PG_PASSWORD"):
        interpolate(app["environment"]["TIERMEM_COLD_URL"], {"TIERMEM_AUTH_TOKENS": "{}"})


def test_cluster_variant(monkeypatch: pytest.MonkeyPatch) -> None:
    doc = load("compose.cluster.yaml")
    services = doc["services"]
    nodes = [name for name, s in services.items() if "--cluster-enabled" in s.get("command", [])]
    assert len(nodes) >= 3
    for name in nodes:
        assert services[name]["image"] == "redis:7"
    init = " ".join(services["redis-cluster-init"]["command"])
    assert "--cluster create" in init and all(n in init for n in nodes)
    pg_env = check_postgres(services, doc)
    replicas = sorted(n for n in services if n.startswith("tiermem"))
    assert replicas == ["tiermem-1", "tiermem-2"]  # two services, one store
    host_ports, volumes = [], []
    for name in replicas:
        app = services[name]
        assert app["depends_on"]["redis-cluster-init"]["condition"] == "service_completed_successfully"
        assert app["depends_on"]["postgres"]["condition"] == "service_healthy"
        cfg = check_tiermem_env(environment(app), monkeypatch)
        check_cold_url(cfg, pg_env, services)
        url = urllib.parse.urlsplit(cfg.redis_url or "")
        assert url.scheme == "redis+cluster" and url.hostname in nodes
        host_ports += [str(p).split(":")[0] for p in app["ports"]]
        mounts = [str(v).split(":") for v in app["volumes"]]
        assert [m[1] for m in mounts] == ["/data"] and mounts[0][0] in doc["volumes"]
        volumes.append(mounts[0][0])
    # each replica its own host port and its own volume for its embedded bits
    assert len(set(host_ports)) == 2 and len(set(volumes)) == 2


def test_dockerfile() -> None:
    text = (ROOT / "Dockerfile").read_text()
    lines = [
        ln.strip() for ln in re.sub(r"\\\n", " ", text).splitlines() if ln.strip() and not ln.startswith("#")
    ]
    assert lines[0] == "FROM python:3.11-slim"
    torch = next(ln for ln in lines if "torch==" in ln)
    assert "torch==2.13.0" in torch and "--index-url https://download.pytorch.org/whl/cpu" in torch
    # torch comes before the project, so the project's requirement is already met
    assert lines.index(torch) < next(
        i for i, ln in enumerate(lines) if re.search(r"pip install .*\s\"?\.(\[[a-z,]+\])?\"?(\s|$)", ln)
    )
    # the image can serve a PostgreSQL log (compose.postgres.yaml): psycopg is installed
    assert any(re.search(r"pip install .*\"\.\[[a-z,]*postgres[a-z,]*\]\"", ln) for ln in lines)
    copied = {tok for ln in lines if ln.startswith("COPY ") for tok in shlex.split(ln)[1:-1]}
    for src in copied:
        assert (ROOT / src).exists(), src
    pyproject = (ROOT / "pyproject.toml").read_text()
    packages = re.search(r"include = \[([^\]]*)\]", pyproject)
    assert packages is not None
    for pkg in re.findall(r'"(\w+)\*"', packages.group(1)):
        assert pkg in copied, f"package {pkg} is not copied into the image"
    assert "EXPOSE 8080" in lines
    assert any(ln.startswith("USER ") and "root" not in ln for ln in lines)
    assert 'CMD ["tiermem", "serve"]' in lines
    assert any("HEALTHCHECK" in ln and "/healthz" in ln for ln in lines)
    env_line = " ".join(ln for ln in lines if ln.startswith("ENV "))
    for key in re.findall(r"(TIERMEM_[A-Z0-9_]+)=", env_line):
        assert key.removeprefix("TIERMEM_").lower() in Config.model_fields, key
