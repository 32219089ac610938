"""`tiermem mcp` answers requests only, however the guard refuses a line: a response (an
object with "result" or "error", no "method") or a notification (a "method", no "id")
holding NaN, Infinity, an integer of more than `MAX_JSON_INT_DIGITS` digits or bytes that
are not UTF-8 is not answered and not passed on; it is logged at WARNING with its size,
never its content, and the session goes on. A request holding the same is answered with
its id (tests/test_mcp_stdio_strict_numbers.py).

Fails on the code before: each such line was answered with a parse error (-32700, id
null): an answer to a response is a response to a response (6b22ac5 stopped it only for
responses the package cannot parse), and JSON-RPC answers no notification.

The real `tiermem mcp` in a child process, lines written byte for byte."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("mcp")
from mcp_stdio_helpers import StdioChild, child_rows, started_child, stdin_log_lines

from tiermem.tiers.models import MAX_JSON_INT_DIGITS

CONV = "quiet"
SECRET = "secret words 6613"  # a line's content: never in the log
LONG = b"1" + b"0" * MAX_JSON_INT_DIGITS  # one digit past the limit
TEXT = b'"text":"' + SECRET.encode() + b'"'

# each case: the line, and what its log line says it is
QUIET: list[tuple[str, bytes, str]] = [
    # a result holding NaN, under an id the package reads (it parsed the line, the guard refused it)
    ("result-nan", b'{"jsonrpc":"2.0","id":3,"result":{' + TEXT + b',"x":NaN}}', "a JSON-RPC response"),
    # an error whose data holds a long integer
    ("error-long-int", b'{"jsonrpc":"2.0","id":4,"error":{"code":-32000,"message":"' + SECRET.encode()
     + b'","data":' + LONG + b"}}", "a JSON-RPC response"),
    # a result holding -Infinity under an id the package does not read
    ("result-fraction-id-infinity", b'{"jsonrpc":"2.0","id":1.5,"result":{' + TEXT + b',"x":-Infinity}}',
     "a JSON-RPC response"),
    # a notification holding NaN
    ("notification-nan", b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,'
     b'"progress":NaN,"message":"' + SECRET.encode() + b'"}}', "a notification"),
    # a notification holding a long integer
    ("notification-long-int", b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":'
     + LONG + b',"progress":1}}', "a notification"),
    # a notification with bytes that are not UTF-8 in a string
    ("notification-not-utf8", b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info",'
     b'"data":"caf\xe9 ' + SECRET.encode() + b'"}}', "a notification"),
]


@pytest.fixture(scope="module")
def child(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StdioChild]:
    d = tmp_path_factory.mktemp("quiet")
    with started_child(d, CONV, secret=SECRET) as c:
        yield c


@pytest.mark.parametrize(("line", "said"), [c[1:] for c in QUIET], ids=[c[0] for c in QUIET])
def test_a_refused_response_or_notification_is_logged_not_answered(child: StdioChild, line: bytes,
                                                                    said: str) -> None:
    logged = len(stdin_log_lines(child))
    before = child_rows(child)
    assert child.send(line, answered=False) == []  # the ping's answer came, and nothing before it
    assert child_rows(child) == before
    new = stdin_log_lines(child)[logged:]
    assert len(new) == 1 and f"stdin line of {len(line)} bytes: {said}" in new[0], new
    assert SECRET not in new[0]
    ok = child.call(50, "history", {"conversation_id": CONV})  # the session goes on
    assert ok["id"] == 50 and ok["result"]["isError"] is False, ok
