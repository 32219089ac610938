"""`tiermem mcp` answers requests, not responses: a line shaped as a JSON-RPC response (an
object with "result" or "error" and no "method") that the `mcp` package does not read
(its id no string and no integer, or none) is not answered and not passed on; it is
logged at WARNING with its size and the id's JSON kind, never its content, and the
session goes on. A response the package reads is passed on as before and not answered.

Fails on the code before: such a line was answered with an invalid request (-32600, id
null, "not a JSON-RPC 2.0 message"): an error sent back for a response is a response to
a response, which a client that answers what it cannot read answers again, and nothing
was logged. The rule for a request's id (fa91a8d) covers objects with a "method" only.

The real `tiermem mcp` in a child process, lines written byte for byte."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

pytest.importorskip("mcp")
from mcp_stdio_helpers import StdioChild, child_rows, started_child, stdin_log_lines

CONV = "resp"
SECRET = "secret words 5521"  # a response's content: never in the log


def response(id_json: bytes | None, member: bytes) -> bytes:
    rid = b"" if id_json is None else b'"id":' + id_json + b","
    return b'{"jsonrpc":"2.0",' + rid + member + b"}"


RESULT = b'"result":{"text":"' + SECRET.encode() + b'"}'
ERROR = b'"error":{"code":-32000,"message":"' + SECRET.encode() + b'"}'

# each case: the line, and what the log line says of its id; each was answered -32600 before
UNREAD: list[tuple[str, bytes, str]] = [
    # a result under a fractional id
    ("result-fraction-id", response(b"1.5", RESULT), "an id that is a number with a fraction"),
    # an error under an object id
    ("error-object-id", response(b"{}", ERROR), "an id that is an object"),
    # a result under a boolean id
    ("result-boolean-id", response(b"true", RESULT), "an id that is a boolean"),
    # an array id
    ("error-array-id", response(b"[1]", ERROR), "an id that is an array"),
    # a result with no id at all
    ("result-no-id", response(None, RESULT), "no id"),
    # a valid id, but an error member the package cannot read (no code)
    ("error-without-code", response(b"7", b'"error":{"message":"' + SECRET.encode() + b'"}'), "id 7"),
]

# each case: a response the package reads, passed on and not answered (before and after)
READ: list[tuple[str, bytes]] = [
    # an error with id null (JSON-RPC's answer to what could not be parsed)
    ("error-null-id", response(b"null", ERROR)),
    # a result for a request the server never sent
    ("result-unknown-id", response(b"99", RESULT)),
]


@pytest.fixture(scope="module")
def child(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StdioChild]:
    d = tmp_path_factory.mktemp("responses")
    with started_child(d, CONV, secret=SECRET) as c:
        yield c


def _goes_on(child: StdioChild, rid: int) -> None:
    ok = child.call(rid, "history", {"conversation_id": CONV})
    assert ok["id"] == rid and ok["result"]["isError"] is False, ok


@pytest.mark.parametrize(("line", "said"), [c[1:] for c in UNREAD], ids=[c[0] for c in UNREAD])
def test_an_unread_response_is_logged_not_answered(child: StdioChild, line: bytes, said: str) -> None:
    logged = len(stdin_log_lines(child))
    before = child_rows(child)
    assert child.send(line, answered=False) == []  # the ping's answer came, and nothing before it
    assert child_rows(child) == before
    new = stdin_log_lines(child)[logged:]
    assert len(new) == 1, new
    assert f"stdin line of {len(line)} bytes" in new[0] and f"with {said} " in new[0], new[0]
    assert SECRET not in new[0]
    _goes_on(child, 50)


@pytest.mark.parametrize("line", [c[1] for c in READ], ids=[c[0] for c in READ])
def test_a_response_the_package_reads_is_passed_on_unanswered(child: StdioChild, line: bytes) -> None:
    logged = len(stdin_log_lines(child))
    assert child.send(line, answered=False) == []
    assert stdin_log_lines(child)[logged:] == []  # not one of tiermem's: the package's to read
    _goes_on(child, 51)


def test_a_burst_of_responses_ends_nothing(child: StdioChild) -> None:
    """Many unread responses in a row, then a call: answered, nothing else."""
    for n in range(50):
        child.write(response(json.dumps(n + 0.5).encode(), RESULT))
    _goes_on(child, 52)
    assert child.lines.empty()
