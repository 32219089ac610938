"""The source turns of a view's sentence (`/ui/c/<id>/turns`) show at most
`SOURCE_TEXT_CHARS` characters of each turn, then "…" and a link to the turn in the log.

Before (a review, 2026-12-07): the fragment held every text whole, 50.01 MB in 4.7 s for
50 turns of 1 MB, and one click on a sentence citing one such turn loaded 1 MB, where the
log page cuts each turn at 600 characters. The cases of a turn past the cut failed then.

Real SQLite under tmp_path, the real app through TestClient.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from html import unescape

import pytest
from fastapi.testclient import TestClient

from tiermem import Config, Memory
from tiermem.inspector.data import TURNS_PER_PAGE
from tiermem.inspector.routes import SOURCE_TEXT_CHARS
from tiermem.service import create_app
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")

TOKEN = "tok-acme-sources-cut-0123456789"
HX = {"HX-Request": "true"}
CONV = "big-turns"
MB = 1024 * 1024
FILLER_TURNS = TURNS_PER_PAGE + 5  # the long turns sit on the log's second page
TAIL = "END-OF-TURN"
ARTICLE = re.compile(r'<article class="source" data-position="(\d+)"><h3>.*?</h3><p>(.*?)</p></article>', re.S)
MORE = re.compile(r' … <a class="more" href="([^"]+)">turn #(\d+) in the log</a> \(([\d,]+) characters\)$')


def text_of(chars: int, start: str) -> str:
    """`chars` characters: `start`, words, and TAIL at the very end (shown only if whole)."""
    body = start + " " + "lorem ipsum dolor " * (chars // 18 + 1)
    return body[: chars - len(TAIL)] + TAIL


# (case id, characters of the turn): each one turn, appended in this order after the filler
SIZES = [
    ("short", 300),  # well under the cut: whole, no link
    ("at-cut", SOURCE_TEXT_CHARS),  # exactly the cut: whole, no link
    ("one-past", SOURCE_TEXT_CHARS + 1),  # one character past: cut (fails before)
    ("one-mb", MB - 64),  # a turn of about 1 MB (the default max_content_bytes): cut (fails before)
]
POSITION = {name: FILLER_TURNS + i for i, (name, _) in enumerate(SIZES)}
TEXT = {name: text_of(chars, f"[{name}]") for name, chars in SIZES}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[TestClient]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("sources-cut") / "data", auth_tokens={TOKEN: "acme"})
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as m:
        m.append_many(CONV, [{"role": "user" if i % 2 == 0 else "assistant", "content": f"filler turn {i}"}
                             for i in range(FILLER_TURNS)], namespace="acme")
        m.append_many(CONV, [{"role": "user", "content": TEXT[name]} for name, _ in SIZES], namespace="acme")
        with TestClient(create_app(cfg, m, start_scheduler=False), base_url="http://127.0.0.1") as c:
            assert c.post("/ui/login", json={"token": TOKEN}, headers=HX).status_code == 200
            yield c


def shown(client: TestClient, positions: list[int]) -> tuple[dict[int, str], int]:
    r = client.get(f"/ui/c/{CONV}/turns", params={"positions": ",".join(map(str, positions))})
    assert r.status_code == 200, r.text
    return {int(p): body for p, body in ARTICLE.findall(r.text)}, len(r.content)


@pytest.mark.parametrize(("name", "chars"), SIZES)
def test_each_turn_cut_with_a_link_to_the_log(client: TestClient, name: str, chars: int) -> None:
    pos = POSITION[name]
    bodies, _ = shown(client, [pos])
    body = bodies[pos]
    whole = TEXT[name]
    if chars <= SOURCE_TEXT_CHARS:
        assert unescape(body) == whole and "…" not in body
        return
    more = MORE.search(body)
    assert more is not None, body[-300:]
    assert unescape(body[: more.start()]) == whole[:SOURCE_TEXT_CHARS]  # exactly the cut's first characters
    assert TAIL not in body
    href, linked, total = unescape(more.group(1)), int(more.group(2)), int(more.group(3).replace(",", ""))
    # the turn in the log: its page (the log's 50 a page) and its row's anchor
    assert href == f"/ui/c/{CONV}?ns=acme&page={pos // TURNS_PER_PAGE}#turn-{pos}" and linked == pos and total == chars
    log = client.get(href.split("#")[0])
    assert log.status_code == 200 and f'id="turn-{pos}"' in log.text


def test_many_big_turns_stay_small(client: TestClient) -> None:
    # every turn of the table at once: the answer is bounded by the cut, not by the texts
    positions = sorted(POSITION.values())
    bodies, size = shown(client, positions)
    assert sorted(bodies) == positions
    assert sum(len(t) for t in TEXT.values()) > MB  # what went whole before
    assert size < len(positions) * (SOURCE_TEXT_CHARS + 1_000), size
