"""A conversation's warm views page (`/ui/c/<id>/views`) is paged as the conversations and
log pages are (a security review, 2026-12-06): VIEWS_PER_PAGE panels a page, the rolling
and constraints views on the first, then the session views in order of session id after a
cursor (`after`), with Next / First page links. Before, it rendered one panel per session
view on one page, reading every session's rows (300 sessions: 0.57 s and 233 kB), so one
end user sending turns under new session ids made the page as large and slow as they
liked. Now only the page's sessions are read: the store's `session_summary_keys` reads a
page of the summaries index (both engines), and the rows a page reads do not grow with the
conversation's sessions (counted: the rows the store hands back, and SQLite's VM steps).
Real SQLite under tmp_path, a real PostgreSQL for the store's conformance, TestClient.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pg_server import fresh_schema

from tiermem import Config, Memory
from tiermem.inspector.data import VIEW_KINDS, VIEWS_PER_PAGE
from tiermem.service import create_app
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.models import SESSION_MAX_CHARS
from tiermem.tiers.warm import Sentence, SummaryView

pytestmark = pytest.mark.usefixtures("clean_env")

TOKEN = "tok-acme-views-paging-0123456789"
HX = {"HX-Request": "true"}
FEW, MANY = "few", "many"  # two conversations: a page must cost the same in both
SESSIONS = {FEW: 2 * VIEWS_PER_PAGE + 7, MANY: 6 * VIEWS_PER_PAGE + 7}  # past two pages; three times that
PANEL = re.compile(r'<section class="view" data-kind="(\w+)"[^>]*>\s*<h2[^>]*>\w+(?: <code>([^<]*)</code>)?</h2>')
NEXT = re.compile(r'<a href="(/ui/c/[^"]+/views\?[^"]*after=[^"]*)">Next</a>')
VM_STEPS_PER_CALL = 100  # SQLite VM instructions between two calls of the progress handler


def sid(i: int) -> str:
    return f"s{i:04d}"  # ids that sort as they are numbered


def seed(mem: Memory, name: str, sessions: int) -> None:
    """One turn per session, each with a stored session view (written as a summarizer would)."""
    mem.append_many(name, [{"role": "user", "content": f"turn of session {i}", "session_id": sid(i)}
                           for i in range(sessions)], namespace="acme")
    key = mem.cold.key_of("acme", name)
    assert key is not None
    now = time.time()
    for i in range(sessions):
        mem.warm.put(SummaryView(key, "session", sid(i), 0, i, i, (Sentence(f"session {i} said hello", (i,)),),
                                 0, "test", now))


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[Memory]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("views-paging") / "data", auth_tokens={TOKEN: "acme"})
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as m:
        for name, n in SESSIONS.items():
            seed(m, name, n)
        yield m


@pytest.fixture
def client(mem: Memory) -> Iterator[TestClient]:
    with TestClient(create_app(mem.config, mem, start_scheduler=False), base_url="http://127.0.0.1") as c:
        assert c.post("/ui/login", json={"token": TOKEN}, headers=HX).status_code == 200
        yield c


def panels(html: str) -> list[tuple[str, str]]:
    return [(kind, key or "") for kind, key in PANEL.findall(html)]


def test_pages_of_at_most_a_page_of_panels_visit_every_session_once(client: TestClient) -> None:
    r = client.get(f"/ui/c/{FEW}/views")
    assert r.status_code == 200, r.text[:300]
    first = panels(r.text)
    # the per-conversation views first, then the first sessions, a page in all
    assert len(first) == VIEWS_PER_PAGE and first[: len(VIEW_KINDS)] == [(k, "") for k in VIEW_KINDS]
    seen = [key for kind, key in first if kind == "session"]
    assert ">First page</a>" not in r.text
    pages = 1
    while (link := NEXT.search(r.text)) is not None:
        r = client.get(link.group(1).replace("&amp;", "&"))
        assert r.status_code == 200, r.text[:300]
        shown = panels(r.text)
        assert 0 < len(shown) <= VIEWS_PER_PAGE and all(kind == "session" for kind, _ in shown)  # sessions only
        assert ">First page</a>" in r.text
        seen += [key for _, key in shown]
        pages += 1
    assert seen == [sid(i) for i in range(SESSIONS[FEW])]  # each once, in order of id
    assert pages == 3


def test_a_version_link_on_a_later_page_stays_on_that_page(client: TestClient) -> None:
    first = client.get(f"/ui/c/{FEW}/views").text
    link = NEXT.search(first)
    assert link is not None
    page = client.get(link.group(1).replace("&amp;", "&")).text
    after = re.search(r"after=([^\"&]+)", link.group(1)).group(1)  # type: ignore[union-attr]
    target = panels(page)[3][1]
    version_link = f"/ui/c/{FEW}/views?ns=acme&amp;kind=session&amp;key={target}&amp;version=1&amp;after={after}"
    assert version_link in page
    again = client.get(version_link.replace("&amp;", "&"))
    assert again.status_code == 200 and ("session", target) in panels(again.text)


def reads(mem: Memory, action: Callable[[], Any]) -> tuple[int, int]:
    """(rows the store handed back, SQLite VM steps / VM_STEPS_PER_CALL spent in statements
    on the summaries table) while `action` ran."""
    rows = steps = 0
    statement = [""]  # the statement running now, as the trace callback saw it start
    real = mem.cold._read

    def counting(sql: str, params: Any = ()) -> list[Any]:
        nonlocal rows
        got = real(sql, params)
        rows += len(got)
        return got

    def step() -> int:
        nonlocal steps
        steps += "summaries" in statement[0]
        return 0  # go on

    mem.cold._read = counting  # type: ignore[method-assign]
    mem.cold._conn.set_trace_callback(lambda sql: statement.__setitem__(0, sql))
    mem.cold._conn.set_progress_handler(step, VM_STEPS_PER_CALL)
    try:
        action()
    finally:
        mem.cold._conn.set_progress_handler(None, 0)
        mem.cold._conn.set_trace_callback(None)
        del mem.cold._read  # the class's method again
    return rows, steps


@pytest.mark.parametrize("after", [None, sid(VIEWS_PER_PAGE)])  # the first page; a later one
def test_a_page_reads_the_same_rows_however_many_sessions(client: TestClient, mem: Memory, after: str | None) -> None:
    params = {"after": after} if after else {}
    cost = {}
    for name in SESSIONS:
        def render(name: str = name) -> None:
            assert client.get(f"/ui/c/{name}/views", params=params).status_code == 200
        cost[name] = reads(mem, render)
    (few_rows, few_steps), (many_rows, many_steps) = cost[FEW], cost[MANY]
    # three times the sessions: the same page, the same rows (before: every session's row, 3x)
    assert many_rows == few_rows, cost
    assert many_steps <= few_steps * 1.2, cost  # and the database scans no other session's views


# (the cursor) a refusal naming `after`, never a 5xx
BAD_CURSORS = [
    "",  # empty: no session id
    "s" * (SESSION_MAX_CHARS + 1),  # past the longest session id
    "s\x00",  # a NUL (PostgreSQL refuses it)
    "s\n1",  # a control character
]


@pytest.mark.parametrize("after", BAD_CURSORS)
def test_a_cursor_that_is_no_session_id_is_refused(client: TestClient, after: str) -> None:
    r = client.get(f"/ui/c/{FEW}/views", params={"after": after})
    assert r.status_code == 422 and "after" in r.text and r.headers["content-type"].startswith("text/html")


def test_a_cursor_past_the_last_session_is_an_empty_last_page(client: TestClient) -> None:
    r = client.get(f"/ui/c/{FEW}/views", params={"after": "zzz"})
    assert r.status_code == 200 and panels(r.text) == [] and ">Next</a>" not in r.text and ">First page</a>" in r.text


@pytest.fixture(params=["sqlite", "postgres"])
def store_mem(request: pytest.FixtureRequest, tmp_path: Path, embedder: FastEmbedder) -> Iterator[Memory]:
    extra: dict[str, str] = {}
    if request.param == "postgres":
        extra = {"cold_url": request.getfixturevalue("pg_url"), "cold_schema": fresh_schema()}
    with Memory(Config(data_dir=tmp_path / "data", **extra), embedder=embedder, hot=False,  # type: ignore[arg-type]
                background_indexing=False) as m:
        seed(m, "c", 9)
        yield m


def test_the_store_pages_session_ids_on_both_engines(store_mem: Memory) -> None:
    key = store_mem.cold.key_of("acme", "c")
    assert key is not None
    warm, ids = store_mem.warm, [sid(i) for i in range(9)]
    # a second version of one view is still one session
    warm.put(SummaryView(key, "session", sid(2), 0, 2, 2, (Sentence("again", (2,)),), 0, "test", time.time()))
    assert store_mem.cold.session_summary_keys(key, None, 4) == ids[:4]
    assert store_mem.cold.session_summary_keys(key, sid(3), 4) == ids[4:8]
    assert store_mem.cold.session_summary_keys(key, sid(8), 4) == []
    seen: list[str] = []
    after: str | None = None
    while True:
        page, after = warm.session_keys_page(key, after=after, limit=4)
        seen += page
        if after is None:
            break
        assert page and after == page[-1]
    assert seen == ids
    assert warm.session_keys_page(key, limit=9) == (ids, None)  # an exact fit ends the paging
