"""An integer in a query string or a path is decimal digits (`0` or no leading zero; the
history's `after` may be `-1`), and a query parameter is given once: anything else is a
422 naming the parameter, and a refused `DELETE .../pins/{position}` unpins nothing. A real
`tiermem serve` process (`serve_open`), spoken to with raw query strings.

Fails on the code before: FastAPI read these integers in pydantic's lax mode (Python's
`int()`), so `k=1.0` searched for one hit while the JSON body's `{"k": 1.0}` is a 422,
`k=1_0` for 10, `k=%205` for 5, `k=+5` for 5, `k=05` for 5; a repeated `k=5&k=6` took the last value; `history?limit=1_0` answered ten
messages; and `DELETE /v1/conversations/c1/pins/1_0` unpinned position 10."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from service_helpers import serve_open

from tiermem import Config

NS = {"X-Tiermem-Namespace": "acme"}
CONV = "c1"
PINNED = 10  # the position pinned first: a refused DELETE must leave it pinned
N_MESSAGES = 12
SEARCH = "/v1/search?q=seat&"
HISTORY = f"/v1/conversations/{CONV}/history?"
LIST = "/v1/conversations?"
UNPIN = f"/v1/conversations/{CONV}/pins/"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    root = tmp_path_factory.mktemp("query-digits")
    with serve_open(root) as served:
        with httpx.Client(base_url=served, headers=NS, timeout=60) as http:
            r = http.post(f"/v1/conversations/{CONV}/messages:batch", json={"messages": [
                {"role": "user", "content": f"seat note {i}"} for i in range(N_MESSAGES)]})
            assert r.status_code in (200, 201), r.text
            r = http.post(f"/v1/conversations/{CONV}/pins", json={"position": PINNED})
            assert r.status_code in (200, 201), r.text
        yield served, Config(data_dir=root / "data").db_path


@pytest.fixture
def url(served: tuple[str, Path]) -> str:
    return served[0]


def _pinned(served: tuple[str, Path]) -> set[int]:
    """The pinned positions, read from the server's SQLite file (the one conversation's)."""
    with sqlite3.connect(f"file:{served[1]}?mode=ro", uri=True) as conn:
        return {row[0] for row in conn.execute("SELECT position FROM pins")}


# (method, path and query as sent, the parameter the 422 names)
REFUSED: list[tuple[str, str, str]] = [
    ("GET", SEARCH + "k=1.0", "k"),  # a point: lax read 1 (the JSON body's 1.0 is a 422 already)
    ("GET", SEARCH + "k=1_0", "k"),  # Python's digit separator: lax read 10
    ("GET", SEARCH + "k=%205", "k"),  # a leading space: lax read 5
    ("GET", SEARCH + "k=5%20", "k"),  # a trailing space: lax read 5
    ("GET", SEARCH + "k=%2B5", "k"),  # a plus sign: lax read 5
    ("GET", SEARCH + "k=05", "k"),  # a leading zero: lax read 5 (an octal-looking number is ambiguous)
    ("GET", SEARCH + "k=%EF%BC%95", "k"),  # a full-width digit five (int() reads 5; pydantic refused it already)
    ("GET", SEARCH + "k=5%0A", "k"),  # a trailing newline ($ would match before it; fullmatch does not)
    ("GET", SEARCH + "k=5&k=6", "k"),  # repeated: lax took the last, 6
    ("GET", SEARCH + "q=window", "q"),  # repeated text parameter (SEARCH has q=seat): lax took the last
    ("GET", HISTORY + "limit=1_0", "limit"),  # lax: a page of ten
    ("GET", HISTORY + "limit=1.0", "limit"),  # a point: lax read a page of one
    ("GET", HISTORY + "after=-01", "after"),  # the cursor -1 written with a leading zero
    ("GET", HISTORY + "after=%2B1", "after"),  # a signed positive cursor: lax read 1
    ("GET", HISTORY + "after=1&after=2", "after"),  # repeated cursor: lax took the last
    ("GET", HISTORY + "limit=2&limit=3", "limit"),  # repeated page size
    ("GET", LIST + "limit=1_0", "limit"),  # the conversations page: lax read 10
    ("GET", LIST + "limit=1&limit=2", "limit"),  # repeated page size
    ("DELETE", UNPIN + "1_0", "position"),  # lax: unpinned position 10 (a write)
    ("DELETE", UNPIN + "%2B10", "position"),  # lax: unpinned position 10 too
    ("DELETE", UNPIN + "010", "position"),  # a leading zero: lax read 10
]


@pytest.mark.parametrize(("method", "target", "param"), REFUSED, ids=[f"{m} {t}" for m, t, _ in REFUSED])
def test_a_loose_integer_or_a_repeated_parameter_is_refused(served: tuple[str, Path], method: str, target: str,
                                                            param: str) -> None:
    r = httpx.request(method, served[0] + target, headers=NS, timeout=60)
    assert r.status_code == 422, (r.status_code, r.text)
    locs = [e["loc"] for e in r.json()["detail"]]
    assert [("path" if method == "DELETE" else "query"), param] in locs, r.text
    assert _pinned(served) == {PINNED}  # nothing unpinned


# (path and query as sent, what the answer must hold): plain digits are still taken
ACCEPTED: list[tuple[str, Any]] = [
    (SEARCH + "k=1", ("hits", 1)),  # one hit
    (SEARCH + "k=10", ("hits", 10)),  # ten of the twelve
    (HISTORY + "limit=3", ("messages", 3)),  # a page of three
    (HISTORY + "after=-1&limit=2", ("messages", 2)),  # the cursor before position 0
    (HISTORY + "after=0", ("messages", N_MESSAGES - 1)),  # zero itself
    (LIST + "limit=1", ("conversations", 1)),  # one id
]


@pytest.mark.parametrize(("target", "holds"), ACCEPTED, ids=[a[0] for a in ACCEPTED])
def test_decimal_digits_are_taken(url: str, target: str, holds: tuple[str, int]) -> None:
    r = httpx.get(url + target, headers=NS, timeout=60)
    assert r.status_code == 200, r.text
    key, count = holds
    assert len(r.json()[key]) == count, r.text


def test_a_pin_is_removed_by_its_position_in_digits(served: tuple[str, Path]) -> None:
    url = served[0]
    r = httpx.post(f"{url}/v1/conversations/{CONV}/pins", json={"position": 0}, headers=NS, timeout=60)
    assert r.status_code in (200, 201), r.text
    r = httpx.delete(url + UNPIN + "0", headers=NS, timeout=60)
    assert r.status_code == 200 and r.json()["pinned"] is False, r.text
    assert _pinned(served) == {PINNED}
