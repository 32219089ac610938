"""Listing a namespace's conversations is paged: `GET /v1/conversations?after=&limit=`.

It answered every id of the namespace in one body (a namespace of 100k conversations: one
answer of megabytes, read and sent whole on every call), and /ui/ listed every id to show
50. Invariants:
- the store lists names in order after a cursor, at most a limit (both engines: SQLite
  and PostgreSQL, one conformance check); `Memory.conversations_page` answers a page and
  the `after` of the next one (None at the end); paging visits every name once, in order;
- the route pages by default (`DEFAULT_CONVERSATIONS_PAGE`, at most
  `MAX_CONVERSATIONS_PAGE`: 422 naming `limit` past it) and says `next_after`;
- `Memory.conversations()` still answers every id, for its callers;
- /ui/ shows one page and a link to the next.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pg_server import fresh_schema

from tiermem import Config, Memory
from tiermem import memory as memory_module
from tiermem.service import create_app
from tiermem.tiers.embed_onnx import FastEmbedder

TOKEN = "tok-acme-0123456789abcdef"
NAMES = [f"c{i:03d}" for i in range(23)]


def _seed(mem: Memory) -> None:
    for name in reversed(NAMES):  # created out of order: the listing orders by name
        mem.append(name, {"role": "user", "content": "hi"}, namespace="acme")
    mem.append("below", {"role": "user", "content": "hi"}, namespace="acme/alice")  # not acme's own


@pytest.fixture(params=["sqlite", "postgres"])
def mem(request: pytest.FixtureRequest, tmp_path: Path, embedder: FastEmbedder) -> Iterator[Memory]:
    extra: dict[str, str] = {}
    if request.param == "postgres":
        extra = {"cold_url": request.getfixturevalue("pg_url"), "cold_schema": fresh_schema()}
    with Memory(Config(data_dir=tmp_path / "data", **extra), embedder=embedder, hot=False,  # type: ignore[arg-type]
                background_indexing=False) as m:
        _seed(m)
        yield m


def test_store_lists_after_a_cursor(mem: Memory) -> None:
    assert mem.cold.list_names("acme", limit=5) == NAMES[:5]
    assert mem.cold.list_names("acme", after="c004", limit=5) == NAMES[5:10]
    assert mem.cold.list_names("acme", after="c020") == NAMES[21:]
    assert mem.cold.list_names("acme", after="zzz") == []
    assert mem.cold.count_names("acme") == len(NAMES)


def test_memory_pages_visit_every_name_once(mem: Memory) -> None:
    seen: list[str] = []
    after: str | None = None
    while True:
        page, after = mem.conversations_page("acme", after=after, limit=7)
        seen += page
        if after is None:
            break
        assert page and after == page[-1]
    assert seen == NAMES
    assert mem.conversations("acme") == NAMES  # the whole list, for existing callers
    assert mem.conversations_page("acme", limit=len(NAMES)) == (NAMES, None)  # an exact fit ends the paging


@pytest.fixture
def client(tmp_path: Path, embedder: FastEmbedder) -> Iterator[TestClient]:
    cfg = Config(data_dir=tmp_path / "data", auth_tokens={TOKEN: "acme"})
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as m:
        _seed(m)
        with TestClient(create_app(cfg, m, start_scheduler=False), base_url="http://127.0.0.1") as c:
            yield c


def test_route_pages_by_default(client: TestClient) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    r = client.get("/v1/conversations", params={"limit": 10}, headers=auth)
    assert r.status_code == 200 and r.json() == {"namespace": "acme", "conversations": NAMES[:10],
                                                 "next_after": "c009"}
    r = client.get("/v1/conversations", params={"after": "c009", "limit": 20}, headers=auth)
    assert r.json()["conversations"] == NAMES[10:] and r.json()["next_after"] is None
    r = client.get("/v1/conversations", params={"limit": memory_module.MAX_CONVERSATIONS_PAGE + 1}, headers=auth)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["query", "limit"]
    r = client.get("/v1/conversations", headers=auth)  # no limit: the default page, not everything
    assert len(r.json()["conversations"]) == min(len(NAMES), memory_module.DEFAULT_CONVERSATIONS_PAGE)


def test_ui_shows_one_page(client: TestClient) -> None:
    from tiermem.inspector import data

    mem: Memory = client.app.state.runtime.memory  # type: ignore[attr-defined]
    per = data.CONVERSATIONS_PER_PAGE
    more = [f"u{i:03d}" for i in range(per)]  # past one page in all
    for name in more:
        mem.append(name, {"role": "user", "content": "hi"}, namespace="acme")
    everything = NAMES + more
    assert client.post("/ui/login", json={"token": TOKEN}, headers={"HX-Request": "true"}).status_code == 200
    first = client.get("/ui/").text
    shown = [name for name in everything if f'data-conversation="{name}"' in first]
    assert shown == everything[:per]
    assert f"{len(everything)} conversation(s)" in first
    link = f'/ui/?ns=acme&amp;after={everything[per - 1]}'
    assert link in first
    second = client.get(link.replace("&amp;", "&")).text
    assert [n for n in everything if f'data-conversation="{n}"' in second] == everything[per:]
    assert ">Next</a>" not in second and ">First page</a>" in second
