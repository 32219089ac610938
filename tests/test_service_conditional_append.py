"""Conditional appends over HTTP (the real app on a real SQLite file; one case on embedded
PostgreSQL): both appends take `expect_position` and `expect_incarnation` in the body
(`Memory.append_outcome`), answer the `incarnation` the messages went to (an opaque
token, not the store's key), and on a mismatch answer 409 naming the position expected
and found and the incarnation sent, writing nothing. Bad conditions are a 422 naming
the field and the limit, writing nothing, never a 5xx. A replay under an idempotency key
answers the first outcome whatever the log holds since. `GET /v1/limits` says
`conditional_appends: true`; OpenAPI documents the fields and the 409.

Fails on the code before: the single append took the fields as message fields (422,
unknown field), the batch refused them (422, extra fields forbidden), no answer carried
an incarnation and /v1/limits did not say it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from client_helpers import NS, served
from pg_server import fresh_schema
from service_helpers import TOKEN_ACME, bearer

from tiermem import Memory
from tiermem.service.schemas import IDEMPOTENCY_HEADER, INCARNATION_PATTERN, REPLAYED_HEADER
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.models import MAX_POSITION

ONE = {"role": "user", "content": "Book the 9:40 to Lisbon, please."}
TWO = [{"role": "user", "content": "Seat 14A?"}, {"role": "assistant", "content": "14A is yours."}]
SINGLE, BATCH = "/messages", "/messages:batch"
UNKNOWN_INCARNATION = "0" * 32  # of the tokens' form, answered for no incarnation
SERVER_ERROR = 500


@pytest.fixture(scope="module")
def url_mem(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[tuple[str, Memory]]:
    with served(tmp_path_factory.mktemp("service-cond") / "data", embedder) as got:
        yield got


def _post(url: str, conv: str, suffix: str, conditions: dict[str, Any], key: str | None = None,
          http: httpx.Client | None = None) -> httpx.Response:
    """Append ONE (single route) or TWO (batch) to `conv` under `conditions` (on `http`'s
    connection when given, else on a connection of its own)."""
    body = {**ONE, **conditions} if suffix == SINGLE else {"messages": TWO, **conditions}
    headers = {**bearer(TOKEN_ACME, NS), **({IDEMPOTENCY_HEADER: key} if key is not None else {})}
    post = http.post if http is not None else httpx.post
    return post(f"{url}/v1/conversations/{conv}{suffix}", json=body, headers=headers)


def _rows(mem: Memory, conv: str, namespace: str = NS) -> list[dict[str, Any]]:
    if conv not in mem.conversations(namespace):
        return []
    return [m.body for m in mem.history(conv, namespace=namespace)]


def _sent(suffix: str) -> int:
    return 1 if suffix == SINGLE else len(TWO)


@pytest.mark.parametrize("suffix", [SINGLE, BATCH])
def test_a_match_writes_and_answers_the_incarnation_to_chain(url_mem: tuple[str, Memory], suffix: str) -> None:
    url, mem = url_mem
    conv = f"match{len(suffix)}"
    first = _post(url, conv, suffix, {"expect_position": 0})  # 0: the conversation does not exist yet
    assert first.status_code == 201, first.text
    token = first.json()["incarnation"]
    n = _sent(suffix)
    nxt = _post(url, conv, suffix, {"expect_position": n, "expect_incarnation": token})
    assert nxt.status_code == 201, nxt.text
    assert nxt.json()["incarnation"] == token
    assert len(_rows(mem, conv)) == 2 * n
    # an unconditional append answers it too
    assert _post(url, conv, suffix, {}).json()["incarnation"] == token


@pytest.mark.parametrize("suffix", [SINGLE, BATCH])
def test_the_incarnation_is_opaque(url_mem: tuple[str, Memory], suffix: str) -> None:
    """The store's key is the bare id the first time the id is used anywhere: shown, it
    would tell a tenant that its id is, or was, used in another namespace."""
    url, mem = url_mem
    conv = f"opaque{len(suffix)}"
    got = _post(url, conv, suffix, {}).json()["incarnation"]
    key = mem.cold.key_of(NS, conv)
    assert key == conv  # the first use of the id: the key is the id itself
    assert re.fullmatch(INCARNATION_PATTERN, got) and conv not in got


# (id, what the conversation holds first (None: nothing), the conditions, the position found)
MISMATCHES: list[tuple[str, int | None, dict[str, Any], int | None]] = [
    ("behind", 3, {"expect_position": 2}, 3),  # another writer appended since
    ("ahead", 3, {"expect_position": 5}, 3),  # the caller counted rows that are not there
    ("not created", None, {"expect_position": 4}, 0),  # missing: the refused append creates nothing
    # an incarnation this conversation never had, at the right position: not that one (named)
    ("other incarnation", 3, {"expect_position": 3, "expect_incarnation": UNKNOWN_INCARNATION}, None),
    ("no conversation, incarnation", None, {"expect_position": 0, "expect_incarnation": UNKNOWN_INCARNATION},
     None),
]


@pytest.mark.parametrize("suffix", [SINGLE, BATCH])
@pytest.mark.parametrize(("case", "held", "conditions", "found"), MISMATCHES, ids=[m[0] for m in MISMATCHES])
def test_a_mismatch_is_a_409_naming_both_positions_and_writes_nothing(
        url_mem: tuple[str, Memory], suffix: str, case: str, held: int | None, conditions: dict[str, Any],
        found: int | None) -> None:
    url, mem = url_mem
    conv = f"mismatch-{case.replace(' ', '-').replace(',', '')}{len(suffix)}"
    if held is not None:
        mem.append_many(conv, [{"role": "user", "content": f"row {i}"} for i in range(held)], namespace=NS)
    before = _rows(mem, conv)
    r = _post(url, conv, suffix, conditions)
    assert r.status_code == 409, r.text
    body = r.json()
    assert body["type"] == "position_mismatch" and body["conversation_id"] == conv
    assert (body["expected_position"], body["found_position"]) == (conditions["expect_position"], found)
    assert body["expected_incarnation"] == conditions.get("expect_incarnation")
    at = conditions["expect_position"]
    if found is not None:
        assert f"expected to go on at position {at}" in body["detail"]
    else:  # both incarnations named: the one sent, the one there now (none: said so)
        assert f"expected to be incarnation '{UNKNOWN_INCARNATION}', going on at position {at}" in body["detail"]
        now = body["found_incarnation"]
        assert (now is None) == (held is None)
        assert body["detail"].endswith("but no conversation of that id exists now; nothing was written" if now is None
                                       else f"but its incarnation is '{now}'; nothing was written"), body
    assert _rows(mem, conv) == before  # nothing written, nothing created


@pytest.mark.parametrize("suffix", [SINGLE, BATCH])
def test_an_incarnation_erased_and_created_again_is_another_one(url_mem: tuple[str, Memory], suffix: str) -> None:
    url, mem = url_mem
    conv = f"reborn{len(suffix)}"
    n = _sent(suffix)
    old = _post(url, conv, suffix, {"expect_position": 0}).json()["incarnation"]
    assert httpx.delete(f"{url}/v1/conversations/{conv}", headers=bearer(TOKEN_ACME, NS)).status_code == 200
    # erased: the old incarnation is gone, and an append naming it creates nothing
    gone = _post(url, conv, suffix, {"expect_position": n, "expect_incarnation": old})
    assert gone.status_code == 409 and gone.json()["found_position"] is None
    assert _rows(mem, conv) == []
    # created again (and as long as before): the old incarnation is still refused
    new = _post(url, conv, suffix, {"expect_position": 0}).json()["incarnation"]
    assert new != old
    refused = _post(url, conv, suffix, {"expect_position": n, "expect_incarnation": old})
    assert refused.status_code == 409 and refused.json()["found_position"] is None
    assert len(_rows(mem, conv)) == n
    ok = _post(url, conv, suffix, {"expect_position": n, "expect_incarnation": new})
    assert ok.status_code == 201 and ok.json()["incarnation"] == new
    assert len(_rows(mem, conv)) == 2 * n


@pytest.mark.parametrize("suffix", [SINGLE, BATCH])
def test_a_replay_under_its_key_answers_the_first_outcome(url_mem: tuple[str, Memory], suffix: str) -> None:
    """The first attempt committed and its answer was lost: the retry under the key gets
    the first answer, not a 409 for the caller's own rows; without the key, a 409."""
    url, mem = url_mem
    conv = f"replay{len(suffix)}"
    first = _post(url, conv, suffix, {"expect_position": 0}, key="req-1")
    again = _post(url, conv, suffix, {"expect_position": 0}, key="req-1")
    assert (first.status_code, again.status_code) == (201, 201)
    assert again.json() == first.json() and again.headers.get(REPLAYED_HEADER) == "true"
    assert _post(url, conv, suffix, {"expect_position": 0}).status_code == 409
    assert len(_rows(mem, conv)) == _sent(suffix)


# (id, the conditions sent, the field a 422 names, what its message says)
REFUSED: list[tuple[str, dict[str, Any], str, str]] = [
    ("negative", {"expect_position": -1}, "expect_position", "greater than or equal to 0"),
    ("past the last position", {"expect_position": MAX_POSITION + 1}, "expect_position",
     f"less than or equal to {MAX_POSITION}"),
    ("huge", {"expect_position": 10 ** 30}, "expect_position", f"less than or equal to {MAX_POSITION}"),
    ("fraction", {"expect_position": 1.5}, "expect_position", "integer"),
    ("text", {"expect_position": "two"}, "expect_position", "integer"),
    ("list", {"expect_position": [0]}, "expect_position", "integer"),
    ("incarnation alone", {"expect_incarnation": UNKNOWN_INCARNATION}, "expect_incarnation",
     "needs expect_position"),
    ("incarnation not a token", {"expect_position": 0, "expect_incarnation": "trip-1"}, "expect_incarnation",
     INCARNATION_PATTERN),
    ("incarnation too long", {"expect_position": 0, "expect_incarnation": "0" * 10_000}, "expect_incarnation",
     INCARNATION_PATTERN),
    ("incarnation a number", {"expect_position": 0, "expect_incarnation": 7}, "expect_incarnation", "string"),
    ("incarnation an object", {"expect_position": 0, "expect_incarnation": {"k": 1}}, "expect_incarnation",
     "string"),
]


@pytest.mark.parametrize("suffix", [SINGLE, BATCH])
@pytest.mark.parametrize(("case", "conditions", "field", "says"), REFUSED, ids=[r[0] for r in REFUSED])
def test_bad_conditions_are_a_422_naming_the_field_and_write_nothing(
        url_mem: tuple[str, Memory], suffix: str, case: str, conditions: dict[str, Any], field: str,
        says: str) -> None:
    url, mem = url_mem
    conv = f"refused{len(suffix)}"
    r = _post(url, conv, suffix, conditions)
    assert r.status_code == 422, r.text
    first = r.json()["detail"][0]
    assert first["loc"] == ["body", field] and says in first["msg"]
    assert _rows(mem, conv) == []


def test_a_condition_inside_a_batch_message_is_refused_by_name(url_mem: tuple[str, Memory]) -> None:
    url, mem = url_mem
    r = httpx.post(f"{url}/v1/conversations/inside/messages:batch", headers=bearer(TOKEN_ACME, NS),
                   json={"messages": [{**ONE, "expect_position": 0}]})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"][:4] == ["body", "messages", 0, "expect_position"]
    assert _rows(mem, "inside") == []


def test_never_a_server_error(url_mem: tuple[str, Memory]) -> None:
    """Whatever the conditions hold: a 4xx, never a 5xx."""
    url, _mem = url_mem
    values = [None, True, -1, 0, 2 ** 63, 1e308, "", "\x00", "0" * 32, [None], {"": 0}]
    # the 242 requests on one kept-alive connection: a client (and its TLS context) per
    # request cost ~20 ms of the ~57 each; the server answers each request as it would alone
    with httpx.Client() as http:
        for suffix in (SINGLE, BATCH):
            for position in values:
                for incarnation in values:
                    r = _post(url, "hostile", suffix, {"expect_position": position, "expect_incarnation": incarnation},
                              http=http)
                    assert r.status_code < SERVER_ERROR, (suffix, position, incarnation, r.text)


def test_limits_say_it_and_openapi_documents_it(url_mem: tuple[str, Memory]) -> None:
    url, _mem = url_mem
    assert httpx.get(f"{url}/v1/limits", headers=bearer(TOKEN_ACME)).json()["conditional_appends"] is True
    spec = httpx.get(f"{url}/openapi.json").json()
    schemas = spec["components"]["schemas"]
    for path in (f"/v1/conversations/{{conversation_id}}{s}" for s in (SINGLE, BATCH)):
        op = spec["paths"][path]["post"]
        assert "409" in op["responses"]
        ref = op["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
        assert {"expect_position", "expect_incarnation"} <= set(schemas[ref]["properties"])
    assert "incarnation" in schemas["AppendOut"]["properties"] and "incarnation" in schemas["BatchOut"]["properties"]


def test_postgres_checks_the_conditions_too(tmp_path: Path, embedder: FastEmbedder, pg_url: str) -> None:
    """The same routes over embedded PostgreSQL: a match writes, a mismatch is a 409 that
    writes nothing, an erased incarnation is refused."""
    with served(tmp_path / "data", embedder, cold_url=pg_url, cold_schema=fresh_schema()) as (url, mem):
        token = _post(url, "pg", BATCH, {"expect_position": 0}).json()["incarnation"]
        assert _post(url, "pg", BATCH, {"expect_position": 2, "expect_incarnation": token}).status_code == 201
        behind = _post(url, "pg", SINGLE, {"expect_position": 2, "expect_incarnation": token})
        assert behind.status_code == 409 and behind.json()["found_position"] == 4
        assert len(_rows(mem, "pg")) == 4
        mem.delete_conversation("pg", namespace=NS)
        mem.append("pg", ONE, namespace=NS)  # created again: one row, another incarnation
        gone = _post(url, "pg", SINGLE, {"expect_position": 1, "expect_incarnation": token})
        assert gone.status_code == 409 and gone.json()["found_position"] is None
        assert len(_rows(mem, "pg")) == 1
