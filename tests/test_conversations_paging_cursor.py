"""A page cursor is a stored conversation id, whatever limit the config had when the id
was made: an id longer than today's `max_id_chars` (created under a higher one) is listed
and becomes `next_after`, and the next page must still be served. A cursor that no id can
be (longer than any config allows, a NUL, which PostgreSQL text cannot hold) is refused
naming `after`, on both engines, never a 5xx.

On the code before, the cursor was checked against the current `max_id_chars`: the page
after a long id answered 422 and every id after it was out of reach."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pg_server import fresh_schema

from tiermem import Config, Memory
from tiermem.config import MAX_ID_CHARS_LIMIT
from tiermem.errors import ValidationError
from tiermem.service import create_app
from tiermem.tiers.embed import Embedder

LONG = "b" * 150  # within a max_id_chars of 200, past the default 128
NAMES = ["a1", LONG, "c1", "d1"]


@pytest.fixture(params=["sqlite", "postgres"])
def config(request: pytest.FixtureRequest, tmp_path: Path, embedder: Embedder) -> Iterator[Config]:
    extra: dict[str, str] = {}
    if request.param == "postgres":
        extra = {"cold_url": request.getfixturevalue("pg_url"), "cold_schema": fresh_schema()}
    with Memory(Config(data_dir=tmp_path / "data", max_id_chars=200, **extra), embedder=embedder,  # type: ignore[arg-type]
                hot=False, background_indexing=False) as m:
        for name in NAMES:
            m.append(name, {"role": "user", "content": "hi"})
    yield Config(data_dir=tmp_path / "data", **extra)  # type: ignore[arg-type]  # reopened with the default limit


def test_pages_pass_an_id_longer_than_todays_limit(config: Config, embedder: Embedder) -> None:
    with Memory(config, embedder=embedder, hot=False, background_indexing=False) as mem:
        seen: list[str] = []
        after: str | None = None
        while True:
            names, after = mem.conversations_page(after=after, limit=2)
            seen += names
            if after is None:
                break
        assert seen == NAMES
        app = create_app(config, mem, auth=False, namespace="default", start_scheduler=False)
        with TestClient(app, base_url="http://127.0.0.1") as c:
            r = c.get("/v1/conversations", params={"after": LONG})
            assert r.status_code == 200 and r.json()["conversations"] == ["c1", "d1"], r.text


# (cursor, why no id can be it)
BAD = [
    ("x" * (MAX_ID_CHARS_LIMIT + 1), "longer than any config allows"),
    ("a\x00b", "a NUL: PostgreSQL text cannot hold one"),
    ("café", "not ASCII: no id under any config is"),
]


@pytest.mark.parametrize(("after", "why"), BAD)
def test_a_cursor_no_id_can_be_is_refused_naming_after(config: Config, embedder: Embedder, after: str,
                                                       why: str) -> None:
    with Memory(config, embedder=embedder, hot=False, background_indexing=False) as mem:
        with pytest.raises(ValidationError, match="after"):
            mem.conversations_page(after=after)
        app = create_app(config, mem, auth=False, namespace="default", start_scheduler=False)
        with TestClient(app, base_url="http://127.0.0.1") as c:
            r = c.get("/v1/conversations", params={"after": after})
            assert r.status_code == 422 and "after" in r.text, (why, r.status_code, r.text)


def test_a_lone_surrogate_cursor_is_refused_naming_after(config: Config, embedder: Embedder) -> None:
    # only the library can be given one (HTTP decodes the query string to valid text);
    # it reached the store and raised UnicodeEncodeError there
    with (Memory(config, embedder=embedder, hot=False, background_indexing=False) as mem,
          pytest.raises(ValidationError, match="after")):
        mem.conversations_page(after="a\ud800")
