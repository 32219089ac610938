"""A fork made without `new_id` gets an id that fits `max_id_chars`.

`max_id_chars` bounds the ids a conversation is created under (f33afbf), and a fork
creates one. Before, a fork without `new_id` was named `parent[:80] + ".fork-" + 12 hex`
(up to 98 characters) whatever the limit: with `max_id_chars = 32` a 30-character parent
got a 48-character child, and the next append to it was refused ("conversation_id: 48
characters exceeds the limit of 32"). Now the parent's part is cut to leave room for the
suffix (`tiers.models.fork_id`), and under a limit too small for any of it the id is the
12 random hex digits alone. Real SQLite files, real PostgreSQL (tests/pg_server.py), the
real HTTP app."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from hash_embedder import HashEmbedder
from pg_server import fresh_schema

from tiermem import Config, Memory
from tiermem.config import MAX_ID_CHARS_LIMIT
from tiermem.service import create_app
from tiermem.tiers.models import ID_PATTERN

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

MIN_ID_CHARS = 8  # the lowest max_id_chars a config accepts
# the documented form of a generated id: `<parent's first characters>.fork-<12 hex>`
# (stated here, not imported: the test runs on the code before the fix too)
FORK_ID_MARK = ".fork-"
FORK_ID_HEX = 12  # random hex digits
FORK_ID_PARENT_CHARS = 80  # at most, of the parent's id
SUFFIX_CHARS = len(FORK_ID_MARK) + FORK_ID_HEX  # 18
HEX = re.compile(rf"[0-9a-f]{{{FORK_ID_HEX}}}")


def parent_of(length: int) -> str:
    """A parent id of `length` characters whose every prefix is told apart from the rest."""
    return ("p" + "0123456789" * 26)[:length]


# (max_id_chars the fork runs under, parent id length): parents near the limit on both
# sides; a parent longer than the limit was created before it was lowered (still readable,
# and forkable: the fork's id is what must fit)
CASES = [
    (16, 1),  # too small for the parent's part and the suffix: the 12 hex alone
    (16, 15),  # just under the limit
    (16, 16),  # at the limit
    (16, 17),  # made under a higher limit
    (32, 1),  # a short parent fits whole beside the suffix
    (32, 14),  # the parent's 14 characters + 18 = 32 exactly, nothing cut
    (32, 30),  # the reviewer's case: 48 characters before
    (32, 32),  # at the limit
    (32, 33),  # made under a higher limit
    (128, 80),  # the parent's part is never over 80 characters, whatever the room
    (128, 127),  # just under the limit
    (128, 128),  # at the limit
    (128, 129),  # made under a higher limit
]


def expected_prefix(parent: str, limit: int) -> str:
    """What a fork's id must start with: the parent's part, cut to leave room."""
    room = min(FORK_ID_PARENT_CHARS, limit - SUFFIX_CHARS)
    return f"{parent[:room]}{FORK_ID_MARK}" if room >= 1 else ""


def check_child(child: str, other: str, parent: str, limit: int) -> None:
    assert len(child) <= limit, (child, len(child))
    assert ID_PATTERN.fullmatch(child), child
    assert child != other  # two forks of one parent differ
    prefix = expected_prefix(parent, limit)
    assert child.startswith(prefix), (child, prefix)
    assert HEX.fullmatch(child[len(prefix):]), child


@pytest.fixture(params=["sqlite", "postgres"])
def config(request: pytest.FixtureRequest, tmp_path: Path) -> Config:
    if request.param == "sqlite":
        return Config(data_dir=tmp_path / "data", max_id_chars=MAX_ID_CHARS_LIMIT)
    return Config(data_dir=tmp_path / "data", max_id_chars=MAX_ID_CHARS_LIMIT,
                  cold_url=request.getfixturevalue("pg_url"), cold_schema=fresh_schema())


def opened(cfg: Config, limit: int) -> Memory:
    return Memory(cfg.model_copy(update={"max_id_chars": limit}), embedder=HashEmbedder(), hot=False,
                  background_indexing=False)


@pytest.fixture
def made(config: Config) -> Iterator[Config]:
    """The store, its parents written under the highest limit any config allows."""
    with opened(config, MAX_ID_CHARS_LIMIT) as mem:
        for length in sorted({length for _limit, length in CASES}):
            mem.append_many(parent_of(length), [{"role": "user", "content": "first"},
                                                {"role": "assistant", "content": "second"}])
    yield config


@pytest.mark.parametrize(("limit", "length"), CASES)
def test_a_fork_without_new_id_fits_the_limit_and_takes_appends(made: Config, limit: int, length: int) -> None:
    parent = parent_of(length)
    with opened(made, limit) as mem:
        child = mem.fork(parent, 0)
        other = mem.fork(parent, 1)
        check_child(child, other, parent, limit)
        check_child(other, child, parent, limit)
        mem.append(child, {"role": "user", "content": "continue in the fork"})  # refused before
        assert [m.body["content"] for m in mem.history(child)] == ["first", "continue in the fork"]
        assert [m.body["content"] for m in mem.history(other)] == ["first", "second"]


def test_the_http_fork_route_names_under_the_limit(tmp_path: Path) -> None:
    limit, parent = 32, parent_of(30)  # the reviewer's case
    cfg = Config(data_dir=tmp_path / "data", max_id_chars=limit)
    with opened(cfg, limit) as mem:
        app = create_app(cfg, mem, auth=False, namespace="default", start_scheduler=False)
        with TestClient(app, base_url="http://127.0.0.1") as c:
            r = c.post(f"/v1/conversations/{parent}/messages", json={"role": "user", "content": "hi"})
            assert r.status_code in (200, 201), r.text
            r = c.post(f"/v1/conversations/{parent}/fork", json={"up_to": 0})
            assert r.status_code == 201, r.text
            child = r.json()["conversation_id"]
            check_child(child, parent, parent, limit)
            r = c.post(f"/v1/conversations/{child}/messages", json={"role": "user", "content": "more"})
            assert r.status_code in (200, 201), r.text  # 422 "exceeds the limit of 32" before


@pytest.mark.parametrize("limit", range(MIN_ID_CHARS, MAX_ID_CHARS_LIMIT + 1))
def test_fork_id_fits_every_limit_a_config_allows(limit: int) -> None:
    from tiermem.tiers.models import fork_id  # the one rule (stores and Memory name forks by it)

    # every limit 8..256, the longest parent any config can have made
    parent = parent_of(MAX_ID_CHARS_LIMIT)
    child = fork_id(parent, limit)
    assert len(child) <= limit and ID_PATTERN.fullmatch(child), child
    # the 12 random digits whenever they fit (8..11: all the limit holds)
    assert HEX.fullmatch(child[-FORK_ID_HEX:]) if limit >= FORK_ID_HEX else re.fullmatch("[0-9a-f]+", child)
