"""History paging (issue 20: `GET .../history?limit=1` returned every message): `limit` plus a
position cursor `after` in the library, over HTTP (documented in OpenAPI) and in the CLI.

Invariants: paging through with each page's `next_after` yields every message exactly once,
in order, also while others append; the last page says `next_after: null`; bad cursors and
limits are refused naming the field and the limit.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from service_helpers import serve_in_thread

from tiermem import Config, Memory
from tiermem.cli import CliState, cli
from tiermem.errors import ValidationError
from tiermem.memory import MAX_HISTORY_PAGE
from tiermem.tiers.embed_onnx import FastEmbedder

N_MESSAGES = 7


@pytest.fixture
def mem(tmp_path: Path, embedder: FastEmbedder) -> Memory:
    m = Memory(Config(data_dir=tmp_path / "d"), embedder=embedder, hot=False, background_indexing=False)
    m.append_many("c1", [{"role": "user", "content": f"message {i}"} for i in range(N_MESSAGES)])
    return m


def _all_pages(mem: Memory, limit: int) -> tuple[list[int], int]:
    got: list[int] = []
    after: int | None = None
    pages = 0
    while True:
        msgs, after = mem.history_page("c1", after=after, limit=limit)
        pages += 1
        got += [m.position for m in msgs]
        if after is None:
            return got, pages


@pytest.mark.parametrize(("limit", "pages"), [
    (1, N_MESSAGES),       # one message a page: the case the issue reported
    (3, 3),                # 3 + 3 + 1
    (N_MESSAGES, 1),       # exactly everything: the first page is the last
    (MAX_HISTORY_PAGE, 1),  # far more than there is
])
def test_paging_yields_every_message_once_in_order(mem: Memory, limit: int, pages: int) -> None:
    got, n = _all_pages(mem, limit)
    assert got == list(range(N_MESSAGES))
    assert n == pages
    mem.close()


def test_a_page_does_not_skip_what_was_appended_meanwhile(mem: Memory) -> None:
    first, after = mem.history_page("c1", limit=4)
    assert [m.position for m in first] == [0, 1, 2, 3] and after == 3
    mem.append("c1", {"role": "assistant", "content": "late"})
    rest, end = mem.history_page("c1", after=after, limit=100)
    assert [m.position for m in rest] == [4, 5, 6, 7] and end is None
    assert rest[-1].text == "late"
    # without limit and cursor: every message, as before
    assert len(mem.history("c1")) == N_MESSAGES + 1
    mem.close()


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"limit": 0}, "limit"),                      # below the range
    ({"limit": MAX_HISTORY_PAGE + 1}, "limit"),   # above it
    ({"limit": True}, "limit"),                   # a bool is not a count
    ({"after": -2}, "after"),                     # -1 is "before the first"; below is nonsense
    ({"after": "3"}, "after"),                    # not a position
])
def test_bad_cursor_or_limit_names_the_field(mem: Memory, kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        mem.history_page("c1", **kwargs)  # type: ignore[arg-type]
    assert field in str(info.value)
    mem.close()


def test_http_pages_and_documents_the_parameters(tmp_path: Path, mem: Memory) -> None:
    cfg = Config(data_dir=tmp_path / "d")
    with serve_in_thread(cfg, mem, auth=False) as base, httpx.Client(base_url=base) as http:
        r = http.get("/v1/conversations/c1/history", params={"limit": 1})
        assert r.status_code == 200
        body = r.json()
        assert [m["position"] for m in body["messages"]] == [0] and body["next_after"] == 0
        seen, after = [0], body["next_after"]
        while after is not None:
            body = http.get("/v1/conversations/c1/history", params={"limit": 2, "after": after}).json()
            seen += [m["position"] for m in body["messages"]]
            after = body["next_after"]
        assert seen == list(range(N_MESSAGES))
        assert http.get("/v1/conversations/c1/history").json()["next_after"] is None
        bad = http.get("/v1/conversations/c1/history", params={"limit": 0})
        assert bad.status_code == 422 and "limit" in bad.text
        spec = http.get("/openapi.json").json()
        params = {p["name"] for p in spec["paths"]["/v1/conversations/{conversation_id}/history"]["get"]["parameters"]}
        assert {"limit", "after"} <= params
    mem.close()


def test_cli_pages_with_after(tmp_path: Path, mem: Memory, embedder: FastEmbedder) -> None:
    mem.close()
    r = CliRunner().invoke(cli, ["--data-dir", str(tmp_path / "d"), "history", "c1", "--after", "1", "--limit", "2",
                                 "--json"], obj=CliState(embedder=embedder))
    assert r.exit_code == 0, r.output
    assert [m["position"] for m in json.loads(r.stdout)] == [2, 3]
    assert "next page: --after 3" in r.stderr
