"""`tiermem mcp`'s stdio transport: the `mcp` package's own stdio entry
(`MCPServer.run_stdio_async`), fed the lines of stdin after tiermem has checked them as the
HTTP service checks a /v1/mcp body.

The package's own reader decodes stdin with `errors="replace"` and drops a line its JSON
parser refuses without answering it: a tool call holding a lone UTF-16 surrogate (what
`JSON.stringify` writes for a cut emoji), an integer past the parser's range or JSON
nested past its recursion limit was never answered, so the host waited on the call until
its own timeout, and bytes that are not UTF-8 were stored as U+FFFD.

Invariants: every line that is not blank, a notification or a response gets an answer. A
line is passed to the server as sent when it is UTF-8, the package's parser takes it and
so does the guard's where it asks (a carriage return in it, JSON whitespace there, as a
space: the package splits lines at one), so what the server answers
is unchanged; any other is answered here and reaches no tool, so nothing is written: with
the JSON-RPC error /v1/mcp answers the same body
(`tiermem.service.guard.mcp_message_refusal`: a parse error with `id` null where it did
not parse; invalid params with the request's id where it parsed but holds a lone
surrogate, nests too deep, or holds NaN, Infinity or an integer of more than
`MAX_JSON_INT_DIGITS` (1,000) digits, which the package's parser takes (a line that may
hold one, `loose_numbers`, is checked by the guard too), or bytes that are not UTF-8 in
JSON that parses around them; an invalid request with `id` null for a request whose id is
no string and no integer, or a refused number, which the package took for a
notification and left unanswered), or, for JSON the guard takes that is no JSON-RPC
message, an invalid request. Every request whose id can be read is answered with that id:
the `mcp` package's ClientSession matches answers by id alone and, with no read timeout
by default, waited for ever on a call answered with id null. A notification (no "id"
key) is passed on and, as JSON-RPC says, not answered; so is a response the package
parses. A response it does not parse (an object with "result" or "error" and no
"method": its id no string and no integer, or none), and a response or a notification
the guard refuses (`unanswered_refusal`: NaN in a result, say), is not answered either,
as a server answers requests (an error sent back would be a response to a response, or
an answer to no request), nor passed on: it is logged at WARNING with its size and id
(or the id's JSON kind), never its content. A fault of tiermem's own check of a line (an exception from
`line_refusal`, or from serializing the refusal it gave) is answered too, with an internal
error (-32603, the request's id when the line gives one a response may carry, else null):
that line reaches no tool and the session goes on (before, one such exception ended it,
exit 1, every call in flight unanswered). Its traceback is logged at ERROR under
tiermem's logger with the line's size and id only: frames and exception types, never an
exception's message, which may quote the line (a log outlives erasure).
The package's answers and these refusals reach stdout in whole lines
under one lock, so an answer is never written inside another. While serving, fd 0 points
at the null device and fd 1 at stderr (as the package's own stdio claim leaves them), so
nothing else in the process reads the wire or writes on it; both are restored after.

Only the `mcp` package's public interface: `run_stdio_async` serves "the process's stdin
and stdout", which is `sys.stdin.buffer` and `sys.stdout.buffer`, and a stream not backed
by fd 0 or 1 it serves in place (what the package's own test of issue #1933 does with
pipes). So, while serving, `sys.stdin` and `sys.stdout` are `StdStream`s whose binary
`buffer` is tiermem's (`CheckedWire`, `AnswerLines`) and whose text side is the original
stream's (a stray `print` lands on stderr, as before).
"""

from __future__ import annotations

import enum
import functools
import io
import json
import logging
import os
import sys
import threading
import traceback
from typing import TYPE_CHECKING, Any, BinaryIO, TextIO, cast

import anyio
import mcp_types as types

from tiermem.adapters.mcp_http import (
    JSONRPC_INTERNAL_ERROR,
    JSONRPC_INVALID_REQUEST,
    jsonrpc_refusal,
    request_id_of,
)
from tiermem.adapters.mcp_server import load_service
from tiermem.tiers.errors import shown

if TYPE_CHECKING:
    from collections.abc import Iterator

    from mcp.server.mcpserver import MCPServer
    from typing_extensions import Buffer

STDIN_FD = 0
STDOUT_FD = 1
STDERR_FD = 2
NOT_JSONRPC = "not a JSON-RPC 2.0 message (a request, notification or response object)"
NEWLINE = b"\n"
CARRIAGE_RETURN = b"\r"
CHECK_FAILED = ("internal error: tiermem's check of this line failed (logged with its traceback); "
                "the line reached no tool and nothing was written")

log = logging.getLogger(__name__)


class Unanswered(enum.Enum):
    """What `line_refusal` gives for a line that is answered with nothing and reaches no
    tool (logged there)."""

    RESPONSE = "a response the package does not read"
    NOTIFICATION = "a notification holding a value the guard refuses"


def line_refusal(raw: bytes) -> dict[str, Any] | Unanswered | None:
    """The JSON-RPC error to answer the stdin line `raw` (its newline stripped) with, None
    to pass it to the server, or `Unanswered.RESPONSE` to drop it (logged): UTF-8 that the
    `mcp` package parses as a message passes, unless it parses as a notification from an
    object that holds an "id" (`names_an_id`) or may hold a number the guard refuses
    (`loose_numbers`); JSON shaped as a response that the package does not parse
    (`unread_response`) is dropped."""
    try:
        message = types.jsonrpc_message_adapter.validate_json(raw.decode("utf-8"), by_name=False)
    except (UnicodeDecodeError, ValueError):  # pydantic's ValidationError is a ValueError
        message = None
    # The package reads a request's id strictly (a string or an integer) and takes an object
    # with any other id (1.5, {}, true, null) for a notification, answering nothing: the host
    # waited until its timeout. Only such a line goes on to the guard's check, whose
    # `check_request_id` refuses it as /v1/mcp does; the package's parser also takes NaN,
    # Infinity and integers of any length, which the guard refuses (strict numbers), so a
    # line that may hold one goes on too. A request, a response and a true notification
    # without either pass as parsed, unread again (no second parse of every line).
    notification_with_id = isinstance(message, types.JSONRPCNotification) and names_an_id(raw)
    if message is not None and not notification_with_id and not loose_numbers(raw):
        return None
    # not at import (importing this module loads no HTTP service); `serve_stdio` has
    # loaded it before reading (`load_service`): this runs in a worker thread, beside the tools'
    from tiermem.service.guard import mcp_message_refusal

    refusal = mcp_message_refusal(raw)
    if refusal is not None:
        # a response or a notification is never answered, however the guard refused it (NaN,
        # a long integer in a result): an error sent back would be an answer to no request
        return unanswered_refusal(raw) or refusal
    if message is not None:  # the guard found nothing to refuse: the package's reading stands
        return None
    doc = json.loads(raw)  # the guard parsed it: strict JSON
    if unread_response(raw, doc):
        return Unanswered.RESPONSE
    # JSON the guard takes, but no message the package knows: answered, not dropped
    return jsonrpc_refusal(JSONRPC_INVALID_REQUEST, NOT_JSONRPC, {"detail": NOT_JSONRPC}, request_id_of(doc))


# every digit as 0, every other byte as a space: a run of digits is a run of zeros, found by
# a substring search (a regular expression scanned a megabyte in 20-40 ms, this in 1-2 ms)
DIGITS_AS_ZEROS = bytes(ord("0") if b in b"0123456789" else ord(" ") for b in range(256))


@functools.cache
def _too_long_digit_run() -> bytes:
    from tiermem.service.guard import MAX_JSON_INT_DIGITS  # not at import, as in line_refusal

    return b"0" * (MAX_JSON_INT_DIGITS + 1)


def loose_numbers(raw: bytes) -> bool:
    """Whether the stdin line `raw` may hold a number /v1/mcp refuses (NaN, Infinity, an
    integer of more than MAX_JSON_INT_DIGITS digits): byte searches, true for every line
    that holds one (-Infinity holds Infinity, a longer integer a run of the limit plus one
    digits), and for some that only quote one in a string, which the guard then takes."""
    return b"NaN" in raw or b"Infinity" in raw or _too_long_digit_run() in raw.translate(DIGITS_AS_ZEROS)


def _lenient_int(digits: str) -> int | None:
    """An integer as `lenient_doc` reads it: None past the guard's limit (int() is quadratic
    in the digits, and refuses past the interpreter's own limit)."""
    from tiermem.service.guard import MAX_JSON_INT_DIGITS  # not at import, as in line_refusal

    return None if len(digits) - digits.startswith("-") > MAX_JSON_INT_DIGITS else int(digits)


def lenient_doc(raw: bytes) -> Any:
    """The stdin line `raw` parsed with NaN, Infinity and long integers read as None (the
    guard refused it for one), and bytes that are not UTF-8 as U+FFFD: only to tell its
    shape, never passed on. None where it does not parse even so."""
    try:
        return json.loads(raw.decode("utf-8", "replace"), parse_constant=lambda _name: None, parse_int=_lenient_int)
    except (ValueError, RecursionError):  # not JSON, too deep: a parse error, id null
        return None


def unanswered_refusal(raw: bytes) -> Unanswered | None:
    """For the stdin line `raw` that the guard refused: `Unanswered.RESPONSE` where it is
    shaped as a response (`unread_response`, logged), `Unanswered.NOTIFICATION` where it is
    a notification (an object with a "method" and no "id", logged), else None (a request:
    answered with the guard's refusal, which carries its id)."""
    doc = lenient_doc(raw)
    if unread_response(raw, doc, refused=True):
        return Unanswered.RESPONSE
    if isinstance(doc, dict) and "method" in doc and "id" not in doc:
        log.warning("stdin line of %d bytes: a notification holding a value the guard refuses (NaN, Infinity, a "
                    "long integer, a lone surrogate); not answered (JSON-RPC answers no notification) and not "
                    "passed on", len(raw))
        return Unanswered.NOTIFICATION
    return None


def unread_response(raw: bytes, doc: Any, *, refused: bool = False) -> bool:
    """Whether `doc`, the parsed stdin line `raw` that the package does not parse (or, with
    `refused`, that the guard refused), is shaped as a response (an object with "result"
    or "error", no "method": its id of another type, or none, or the two members at once),
    logging it if so. A server answers
    requests; an error sent back for a response would be a response to a response, which a
    client that answers what it cannot read would answer again."""
    if not isinstance(doc, dict) or "method" in doc or not ("result" in doc or "error" in doc):
        return False
    from tiermem.service.guard import ID_KINDS  # not at import, as in line_refusal

    rid = doc.get("id")
    if "id" not in doc:
        said = "no id"
    elif request_id_of(doc) is not None:
        said = f"id {shown(rid)}"
    else:
        said = "an id that is " + next((name for t, name in ID_KINDS if isinstance(rid, t)), type(rid).__name__)
    why = "holding a value the guard refuses" if refused else "that the mcp package does not read"
    log.warning("stdin line of %d bytes: a JSON-RPC response (\"result\" or \"error\", no \"method\") with %s %s; "
                "not answered (a server answers requests) and not passed on", len(raw), said, why)
    return True


def names_an_id(raw: bytes) -> bool:
    """Whether the stdin line `raw` is a JSON object with an "id" key (of any value)."""
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):  # the package parsed it; a fault here passes it as it parsed
        return False
    return isinstance(doc, dict) and "id" in doc


def readable_id(raw: bytes) -> str | int | None:
    """The id an answer to the stdin line `raw` carries back (`request_id_of`), or None
    where the line gives none: not JSON, no request, or an id no response may carry."""
    try:
        return request_id_of(json.loads(raw))
    except (ValueError, RecursionError):  # not UTF-8 or JSON, an integer past Python's range, too deep
        return None


def traceback_text(exc: BaseException) -> str:
    """`exc`'s traceback as Python prints it (its causes first), each exception named by
    its type only: a message may quote the line (a ValidationError quotes its input), and
    the log holds no content."""
    chain: list[BaseException] = []
    at: BaseException | None = exc
    while at is not None and all(at is not seen for seen in chain):  # a cycle of causes ends
        chain.append(at)
        at = at.__cause__ if at.__cause__ is not None else None if at.__suppress_context__ else at.__context__
    parts: list[str] = []
    for link in reversed(chain):
        parts.append("Traceback (most recent call last):\n")
        parts.extend(traceback.format_list(traceback.extract_tb(link.__traceback__)))
        parts.append(f"{type(link).__module__}.{type(link).__qualname__} (its message left out: it may quote the line)\n")
    return "".join(parts)


def check_failed(raw: bytes, exc: Exception) -> dict[str, Any]:
    """Log the fault `exc` of checking the stdin line `raw` and give the internal error
    that answers the line."""
    rid = readable_id(raw)
    log.error("stdin line of %d bytes (id %s): its check raised %s; answered with an internal error (%d), "
              "the session goes on\n%s", len(raw), shown(rid), type(exc).__name__, JSONRPC_INTERNAL_ERROR,
              traceback_text(exc).rstrip("\n"))
    return jsonrpc_refusal(JSONRPC_INTERNAL_ERROR, CHECK_FAILED, {"detail": CHECK_FAILED}, rid)


class AnswerLines(io.RawIOBase):
    """stdout's binary side for the package's writer: what it writes goes on to the wire
    in whole lines only, under the lock `answer` takes too, so a refusal written from the
    reader's thread never lands inside an answer the package writes in chunks."""

    def __init__(self, wire: BinaryIO) -> None:
        super().__init__()
        self._wire = wire
        self._lock = threading.Lock()
        self._partial = bytearray()  # the package's line not yet ended

    def writable(self) -> bool:
        return True

    def write(self, data: Buffer) -> int:
        with self._lock:
            self._partial += data
            end = self._partial.rfind(NEWLINE) + 1
            if end:
                self._wire.write(self._partial[:end])
                self._wire.flush()
                del self._partial[:end]
        return memoryview(data).nbytes

    @staticmethod
    def line_of(message: dict[str, Any]) -> bytes:
        """The JSON-RPC error `message` as one line, serialized as the package serializes
        what its server sends."""
        line = types.JSONRPCError.model_validate(message).model_dump_json(by_alias=True, exclude_unset=True)
        return line.encode("utf-8") + NEWLINE

    def answer(self, line: bytes) -> None:
        """Write `line` (`line_of`) on the wire, whole."""
        with self._lock:
            self._wire.write(line)
            self._wire.flush()


class CheckedWire(io.RawIOBase):
    """stdin's binary side for the package's reader: the wire's lines it would drop
    unanswered or alter are answered through `answers` instead of being passed on."""

    def __init__(self, wire: BinaryIO, answers: AnswerLines) -> None:
        super().__init__()
        self._wire = wire
        self._answers = answers
        self._line = b""  # the checked line being read out
        self._at = 0  # how much of it has been

    def readable(self) -> bool:
        return True

    def readinto(self, into: Buffer) -> int:
        while self._at == len(self._line):
            raw = self._wire.readline()
            if not raw:
                return 0  # the host closed stdin
            line = raw.rstrip(b"\r\n")
            if not line.strip():
                continue  # the package's reader would drop it too; there is nothing to answer
            try:
                refusal = line_refusal(line)
                if isinstance(refusal, Unanswered):
                    continue  # logged by the check; nothing to answer, nothing passed on
                answer = None if refusal is None else AnswerLines.line_of(refusal)
            except Exception as exc:  # a fault of the check: this line's alone (were it to escape,
                # the package's reader task would end the session, exit 1, calls in flight unanswered)
                answer = AnswerLines.line_of(check_failed(line, exc))
            if answer is not None:
                self._answers.answer(answer)  # outside the try: a wire that fails ends serving
                continue
            # The package reads with universal newlines, so a lone CR would split the line
            # in two unparseable halves. In a line its parser takes a CR can only be JSON
            # whitespace (it refuses one inside a string), so a space means the same.
            self._line, self._at = line.replace(CARRIAGE_RETURN, b" ") + NEWLINE, 0
        out = memoryview(into).cast("B")
        n = min(len(out), len(self._line) - self._at)
        out[:n] = self._line[self._at:self._at + n]
        self._at += n
        return n


class StdStream:
    """A standard stream for `sys.stdin` / `sys.stdout` while serving: its `buffer` is the
    wire, everything else the original stream's (on the diverted fd), so only the
    package's transport reads and writes the wire."""

    def __init__(self, text: TextIO, buffer: io.BufferedIOBase | io.RawIOBase) -> None:
        self.buffer = buffer
        self._text = text

    def __getattr__(self, name: str) -> Any:
        return getattr(self._text, name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._text)


async def serve_stdio(server: MCPServer) -> None:
    """Serve `server` on stdin and stdout until stdin closes."""
    # the reader's guard, imported in this thread before any line is read: the reader and
    # the tools run in worker threads, and two of them importing the service's modules at
    # once could get a partly initialised one (mcp_server.load_service)
    load_service()
    sys.stdout.flush()  # what was printed before goes out before fd 1 is diverted
    wire_in = os.fdopen(os.dup(STDIN_FD), "rb")
    wire_out = os.fdopen(os.dup(STDOUT_FD), "wb")
    saved = {fd: os.dup(fd) for fd in (STDIN_FD, STDOUT_FD)}
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, STDIN_FD)
    os.close(null)
    os.dup2(STDERR_FD, STDOUT_FD)
    stdin, stdout = sys.stdin, sys.stdout
    answers = AnswerLines(wire_out)
    sys.stdin = cast("TextIO", StdStream(stdin, io.BufferedReader(CheckedWire(wire_in, answers))))
    sys.stdout = cast("TextIO", StdStream(stdout, answers))
    try:
        await server.run_stdio_async()
    finally:
        sys.stdin, sys.stdout = stdin, stdout
        for fd, dup in saved.items():
            os.dup2(dup, fd)
            os.close(dup)
        wire_in.close()
        wire_out.close()


def run_stdio(server: MCPServer) -> None:
    """`tiermem mcp`: serve `server` on this process's stdin and stdout."""
    anyio.run(serve_stdio, server)
