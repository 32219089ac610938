"""The body guard: an ASGI middleware that checks every request before FastAPI parses it.

Invariants (tiermem.service states the rules): first, the one Host and Origin check of
the whole app (`HostCheck`, DNS rebinding; /v1/mcp included, whose own check in the mcp
package is off): on a loopback `http_host` a request is answered only when its Host is a
loopback name (127.0.0.1, localhost, [::1], any port) or in `http_allowed_hosts` (else
421) and its Origin, when sent, names such a host (else 403); on another `http_host` only
when `http_allowed_hosts` is set; /healthz (no data) answers every Host, for probes. A header whose second copy would let two
parsers disagree (`SINGLE_HEADERS`) is refused when repeated (400), and so is a request
carrying both Content-Length and Transfer-Encoding (400, the connection closed; RFC 9112
6.3, request smuggling: the server framed it by the chunks); a /v1 request without
a valid bearer token is refused before any of its body is read (401); a body is read
into memory up to `config.max_body_bytes` and no further (413, from Content-Length or by
counting the stream; the connection closed, as the rest of the body is never read), and whole within `config.http_body_timeout_s` of the request's
head (else 408, the connection closed: a stalled client held it for ever); a non-empty
body must be `application/json` in UTF-8 or carry no Content-Type (else 415); one with
none is taken for JSON, the app seeing `JSON_CONTENT_TYPE` added (FastAPI no longer
parses a body that names no type: it answered 422 "not a valid dictionary"); and it must be
strict UTF-8 JSON without NaN/Infinity, nested at most `MAX_JSON_DEPTH` levels plus those its route wraps a message in (`ENVELOPE_LEVELS`: a
batch's `{"messages": [...]}` 2, an MCP tool call's JSON-RPC 3), so that a message nests
`MAX_JSON_DEPTH` levels on every way in, as in the library, without lone surrogates or
integers of more than `MAX_JSON_INT_DIGITS` digits, the library's own limit on what a
message stores (422 naming where, down to the number, and the limit: the parser leaves a
refused number in its place, `_Refused`, and the walk of the parsed body names it). A
refusal echoes caller input within `tiers.errors.MAX_SHOWN_CHARS`, the one bound: a
Content-Type value and every key of a location that is no plain name are quoted and cut
(`shown`, `shown_key`). The
app then reads the buffered body, never the wire again. Every refusal answers the
service's error JSON, except that under /ui (`UI_PATH`) it is the inspector's HTML refusal
of the same status and message, which its forms show, and on the MCP endpoint (`MCP_PATHS`) a refusal of the body
or its framing (400, 413, 415, 422: the same status and message) is a JSON-RPC error
carrying that JSON in its `data` (`mcp_http.jsonrpc_refusal`), so an MCP client shows the
reason. A body that did not parse (not JSON, past the parser's depth) is a parse error
(-32700) with `id` null, as JSON-RPC 2.0 requires: its id cannot be known. A body that
parsed but holds a problem (too deep for the route within the parser's reach, a lone
surrogate, NaN, Infinity, a long integer; bytes that are not UTF-8 inside JSON that parses
around them) is invalid params (-32602, as the mcp package answers a parsed message it
refuses), carrying the request's id when it has a valid one (`mcp_http.request_id_of`),
else null: an MCP client matches an answer to its call by id alone, and one with id null
for a call whose id was there to read left the call waiting for ever (the mcp package's
ClientSession has no read timeout by default). A refused number as the id itself is an
invalid request (-32600), id null. A JSON-RPC request (an object with a "method") whose "id" is no string and no
integer (a fraction, an object, an array, a boolean, null: `check_request_id`) is an
invalid request (-32600) with `id` null, the rule named, and reaches no tool: the mcp
package took it for a notification and answered nothing (202 over HTTP, no line over
stdio), so the client waited for an answer that never came. A notification (no "id"
key) is not touched by it; an array (a batch) is no object, and the mcp package refuses
it whole. Its auth and Host/Origin refusals stay plain, as the mcp package's own are.
`tiermem mcp` answers a stdin line with the same refusal (`mcp_message_refusal`), so
both transports refuse the same messages alike.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterable, MutableMapping
from typing import TYPE_CHECKING, Any

from tiermem.adapters.mcp_http import (
    JSONRPC_INVALID_PARAMS,
    JSONRPC_INVALID_REQUEST,
    JSONRPC_PARSE_ERROR,
    MCP_PATH,
    MCP_PATHS,
    jsonrpc_refusal,
    refusal_message,
    request_id_of,
)
from tiermem.config import is_loopback
from tiermem.service.asgi import ASGIApp, HttpMiddleware, Receive, Scope, Send
from tiermem.service.auth import NAMESPACE_HEADER
from tiermem.service.schemas import IDEMPOTENCY_HEADER, error_body
from tiermem.tiers.errors import body_limit_detail, shown, shown_key
from tiermem.tiers.models import MAX_JSON_DEPTH  # parse_message's limit too: one for every way in
from tiermem.tiers.plain_json import MAX_JSON_INT_DIGITS, int_digits_problem

if TYPE_CHECKING:
    from tiermem.service.runtime import Runtime

# headers whose second copy would let two parsers disagree (the guard and FastAPI read
# different copies): a request that repeats one is refused. Two idempotency keys would
# make a retry's replay depend on which copy a proxy kept
SINGLE_HEADERS = ("content-type", "content-length", "authorization", NAMESPACE_HEADER.lower(),
                  IDEMPOTENCY_HEADER.lower())
# the 400 of a request that carries both framings (RFC 9112 6.3: a server refuses it or
# ignores Content-Length; refused, as a proxy in front may have framed it by the other)
FRAMING_CONFLICT_DETAIL = ("the request carries both Content-Length and Transfer-Encoding headers; send one "
                           "(RFC 9112 6.3); nothing was stored")
# what a non-empty body without a Content-Type is taken for: the app sees this header added
# (FastAPI, as of 0.165, parses only a body that names JSON: its strict_content_type)
JSON_CONTENT_TYPE = (b"content-type", b"application/json")
# the names a loopback service answers to (any port): what a browser on this host uses
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
UI_PATH = "/ui"  # the inspector's pages: a refusal there is its HTML, not the API's JSON (`_refuse`)
HOST_UNCHECKED_PATHS = frozenset({"/healthz"})  # liveness probes name whatever they like; no data
ORIGIN_SCHEMES = ("http", "https")
# Levels a route's body wraps a message in, above the message itself (a path matching no
# pattern: 0). The body guard allows a body MAX_JSON_DEPTH plus these, so that a message may
# nest MAX_JSON_DEPTH levels whichever way it comes in, exactly as parse_message allows it
# in the library: bounding the whole body at MAX_JSON_DEPTH left a message of a batch 2
# levels fewer and one sent to the MCP `append` tool 3. A single append's body is the
# message itself (0); every other route's body is flat, and its model refuses depth anyway.
ENVELOPE_LEVELS: tuple[tuple[re.Pattern[str], int], ...] = (
    # POST /v1/conversations/{id}/messages:batch: {"messages": [<message>, ...]}
    (re.compile(r"/v1/conversations/[^/]+/messages:batch"), 2),
    # a tools/call of the MCP append tool: {"params": {"arguments": {"message": <message>}}}
    # (the mcp package takes one JSON-RPC message per request, no batch array around it)
    (re.compile("|".join(map(re.escape, MCP_PATHS))), 3),  # either spelling
)


# what a request's "id" is, by its JSON type, when it is no string and no integer: a
# refusal names the kind, never the value (an object or array may be as large as the body)
ID_KINDS: tuple[tuple[type, str], ...] = (
    (bool, "a boolean"),  # before int: Python's bool is an int, JSON's true is no integer
    (float, "a number with a fraction or an exponent"),  # 1.5, and 1.0 or 1e3 as JSON spells them
    (dict, "an object"),
    (list, "an array"),
    (type(None), "null"),  # JSON-RPC 2.0 discourages it, MCP forbids it
)


class _BodyProblem(Exception):
    """A refused body: where, why, the error type; `parsed` whether the body parsed (the
    problem is in the parsed document); `request_id` the JSON-RPC id read from a body that
    parsed (`request_id_of`), None when it did not parse or has none; `code` the JSON-RPC
    error code where the problem decides it (`check_request_id`), else None (`_as_jsonrpc`
    derives it)."""

    def __init__(self, loc: list[str | int], msg: str, type_: str, request_id: str | int | None = None,
                 *, parsed: bool = False, code: int | None = None) -> None:
        super().__init__(msg)
        self.loc, self.msg, self.type = loc, msg, type_
        self.request_id, self.parsed, self.code = request_id, parsed, code


def body_timeout_detail(timeout_s: float) -> str:
    """The 408 of a body that did not arrive whole within `timeout_s` seconds."""
    return (f"the request body did not arrive within {timeout_s:g} s of its headers (http_body_timeout_s); "
            "nothing was stored")


_REFUSED_NUMBER = "json_invalid"  # the error type of a refused number (NaN, Infinity, a long integer)


class _Refused:
    """A number the parser met that the guard refuses (NaN, Infinity, an integer past
    MAX_JSON_INT_DIGITS), left in the parsed document in its place: the document still
    parses, so its request id is read and `_check_document` names where the number is.
    Raising from the parser's hook lost both: the refusal named only `body`, and over MCP
    it was a parse error with id null, an answer no client could match to its call (the
    mcp package's ClientSession waited for ever). Never leaves `check_json_body`."""

    __slots__ = ("msg",)

    def __init__(self, msg: str) -> None:
        self.msg = msg


def _refused_constant(name: str) -> _Refused:
    return _Refused(f"{name} is not valid JSON")


def _bounded_int(digits: str) -> int | _Refused:
    # Digits of one JSON integer anywhere in a body: at most the library's limit on what a
    # message stores (MAX_JSON_INT_DIGITS, tiers.plain_json: a uint256 has 78 digits), so that a
    # row stored in process can be sent back over HTTP and MCP. Fields tiermem reads as
    # numbers (k, budget, limits) have their own small ranges in their models. Bounded before
    # int() runs: Python parses an int in time quadratic in its digits (and refuses past
    # 4,300 with a ValueError json.loads does not wrap).
    count = len(digits) - digits.startswith("-")
    if count > MAX_JSON_INT_DIGITS:  # int() not run: quadratic in the digits
        return _Refused(int_digits_problem(count))
    return int(digits)


def _parsed_or_none(text: str) -> tuple[Any] | None:
    """`text` parsed as `check_json_body` parses it (refused numbers left as `_Refused`),
    in a 1-tuple (the document may be null itself); None where it does not parse."""
    try:
        return (json.loads(text, parse_constant=_refused_constant, parse_int=_bounded_int),)
    except (json.JSONDecodeError, RecursionError):
        return None


def depth_limit(path: str) -> int:
    """How deep a body sent to `path` may nest: MAX_JSON_DEPTH plus the levels its route
    wraps a message in (`ENVELOPE_LEVELS`)."""
    for pattern, levels in ENVELOPE_LEVELS:
        if pattern.fullmatch(path):
            return MAX_JSON_DEPTH + levels
    return MAX_JSON_DEPTH


def _too_deep(max_depth: int) -> str:
    """The refusal of a body nested deeper than `max_depth`, naming the message's limit
    when the route's envelope adds levels to it."""
    if max_depth == MAX_JSON_DEPTH:
        return f"JSON nested deeper than {MAX_JSON_DEPTH} levels"
    return (f"JSON nested deeper than {max_depth} levels: a message nests at most {MAX_JSON_DEPTH} "
            f"(the message itself level 1), and this request wraps it in {max_depth - MAX_JSON_DEPTH} more")


def check_json_body(raw: bytes, max_depth: int = MAX_JSON_DEPTH, *, jsonrpc: bool = False) -> None:
    """Raise `_BodyProblem` unless `raw` is strict UTF-8 JSON, at most `max_depth` deep,
    whose strings (keys included) are valid Unicode; and, with `jsonrpc` (an MCP message),
    unless its request id is one a response may carry (`check_request_id`)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        problem = f"request body is not valid UTF-8 (byte {exc.start})"
        # JSON but for bytes in a string (each read as U+FFFD here): its request id is read,
        # so a JSON-RPC answer carries it back, as a client matches answers by id (the mcp
        # package's ClientSession waited for ever on one with id null); else a parse error
        readable = _parsed_or_none(raw.decode("utf-8", "replace"))
        if readable is None:
            raise _BodyProblem(["body"], problem, "unicode_error") from None
        raise _BodyProblem(["body"], problem, "unicode_error", request_id_of(readable[0]), parsed=True) from None
    try:
        doc = json.loads(text, parse_constant=_refused_constant, parse_int=_bounded_int)
    except json.JSONDecodeError as exc:
        raise _BodyProblem(["body", exc.pos], f"invalid JSON: {exc.msg}", "json_invalid") from None
    except RecursionError:
        raise _BodyProblem(["body"], _too_deep(max_depth), "json_too_deep") from None
    try:
        _check_document(doc, max_depth)
    except _BodyProblem as p:
        # the body parsed, so its id was determined: a JSON-RPC answer carries it back. A
        # refused number as a request's id itself leaves none to carry: an invalid request
        # with id null, as `check_request_id` answers an id of another type
        bad_id = (jsonrpc and p.type == _REFUSED_NUMBER and p.loc == ["body", "id"] and isinstance(doc, dict)
                  and "method" in doc)
        raise _BodyProblem(p.loc, p.msg, p.type, request_id_of(doc), parsed=True,
                           code=JSONRPC_INVALID_REQUEST if bad_id else None) from None
    if jsonrpc:
        check_request_id(doc)


def check_request_id(doc: Any) -> None:
    """Raise `_BodyProblem` (invalid request, id null) when the parsed `doc` is a JSON-RPC
    request, an object with a "method", whose "id" is no string and no integer: JSON-RPC 2.0
    (an Invalid Request, answered with id null) and MCP (a request's id is a string or an
    integer, never null). The mcp package parses such an object as a notification and
    answers nothing, which left the client waiting; the one rule for both transports
    (`GuardMiddleware` on /v1/mcp, `mcp_message_refusal` for `tiermem mcp`'s lines). A
    notification has no "id" key and is left alone; an array (a batch) is no object here
    and the mcp package refuses it whole; a string id with a lone surrogate was refused
    before this (`_check_document`)."""
    if not isinstance(doc, dict) or "method" not in doc or "id" not in doc:
        return
    rid = doc["id"]
    if isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool)):
        return
    kind = next((name for t, name in ID_KINDS if isinstance(rid, t)), type(rid).__name__)
    raise _BodyProblem(["body", "id"], f"a request's id must be a string or an integer (JSON-RPC 2.0, MCP), "
                       f"not {kind}; a notification sends no id; nothing was run", "jsonrpc_id",
                       parsed=True, code=JSONRPC_INVALID_REQUEST)


def _check_document(doc: Any, max_depth: int) -> None:
    """Raise `_BodyProblem` unless the parsed `doc` nests at most `max_depth` levels (objects
    and arrays count, the body itself level 1, as the library counts a message's levels) and
    its strings (keys included) are valid Unicode."""
    stack: list[tuple[Any, list[str | int]]] = [(doc, ["body"])]
    while stack:
        node, loc = stack.pop()
        # loc holds "body" and the keys down to node: an object or array at level len(loc)
        if isinstance(node, dict | list) and len(loc) > max_depth:
            raise _BodyProblem(_shown_loc(loc[:max_depth + 1]), _too_deep(max_depth), "json_too_deep")
        if isinstance(node, str):
            _check_unicode(node, loc)
        elif isinstance(node, _Refused):  # a number refused where it was parsed, named where it is
            raise _BodyProblem(_shown_loc(loc), node.msg, _REFUSED_NUMBER)
        elif isinstance(node, dict):
            for k, v in node.items():
                _check_unicode(k, [*loc, k])
                stack.append((v, [*loc, k]))
        elif isinstance(node, list):
            stack.extend((v, [*loc, i]) for i, v in enumerate(node))


def _check_unicode(s: str, loc: list[str | int]) -> None:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        # the offending key is quoted by `shown_key`, its lone surrogate escaped by repr
        raise _BodyProblem(
            _shown_loc(loc), "contains a lone UTF-16 surrogate, which is not valid Unicode", "unicode_error"
        ) from None


def _shown_loc(loc: list[str | int]) -> list[str | int]:
    """A refusal's location as it may be answered: each caller key itself when it is a
    plain name, else quoted and bounded (`tiers.errors.shown_key`), an index as it is. A
    key went into the 422 whole: a 100,000-character one gave a 100,168-byte answer."""
    return [p if isinstance(p, int) else shown_key(p) for p in loc]


# the header of an answer after which the connection ends: one that refuses a body it
# did not read whole (413, 408), whose rest would otherwise still come on this connection
CLOSE = ((b"connection", b"close"),)


async def _send_json(
    send: Send, status: int, body: dict[str, Any], headers: Iterable[tuple[bytes, bytes]] = ()
) -> None:
    payload = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


async def _refuse(
    send: Send,
    path: str,
    status: int,
    body: dict[str, Any],
    headers: Iterable[tuple[bytes, bytes]] = (),
    request_id: str | int | None = None,
    *,
    parsed: bool = False,
    code: int | None = None,
) -> None:
    """Answer a refusal of the request's body or framing: the service's error JSON, or on
    the MCP endpoint a JSON-RPC error of the same status and message (an MCP client reads
    the reason only from a JSON-RPC error), carrying `request_id` when the body parsed; on
    the inspector's (`UI_PATH`) its refusal fragment, HTML of the same status and message
    with its page headers (`tiermem.inspector.routes.refusal_fragment`), which htmx shows
    where the form's answer goes."""
    if path in MCP_PATHS:
        body = _as_jsonrpc(body, request_id, parsed=parsed, code=code)
    elif path == UI_PATH or path.startswith(UI_PATH + "/"):
        # imported here: the inspector imports this module
        from tiermem.inspector.routes import PAGE_HEADERS, refusal_fragment

        page = refusal_fragment(body["detail"]).encode()
        await send({"type": "http.response.start", "status": status, "headers": [
            (b"content-type", b"text/html; charset=utf-8"), (b"content-length", str(len(page)).encode()),
            *((k.lower().encode(), v.encode()) for k, v in PAGE_HEADERS.items()), *headers]})
        await send({"type": "http.response.body", "body": page})
        return
    await _send_json(send, status, body, headers)


def _as_jsonrpc(body: dict[str, Any], request_id: str | int | None, *, parsed: bool,
                code: int | None = None) -> dict[str, Any]:
    """The service's error JSON `body` as the JSON-RPC error an MCP client reads (`data`
    carries `body`): `code` where the check decided it (an id no response may carry: an
    invalid request, `request_id` None); else a refusal of the framing is an invalid
    request, one of a body that parsed invalid params with its id, one of a body that did
    not a parse error (id null)."""
    detail = body["detail"]
    if code is not None:  # the check named it (`_BodyProblem.code`)
        return jsonrpc_refusal(code, refusal_message(detail), body, request_id)
    if isinstance(detail, str):  # the framing, not the body's JSON
        code = JSONRPC_INVALID_REQUEST
    elif parsed:  # the id was read, so this is no parse error (those answer id null)
        code = JSONRPC_INVALID_PARAMS
    else:
        code = JSONRPC_PARSE_ERROR
        request_id = None
    return jsonrpc_refusal(code, refusal_message(detail), body, request_id)


def mcp_message_refusal(raw: bytes) -> dict[str, Any] | None:
    """The JSON-RPC error /v1/mcp answers a body `check_json_body` refuses (its request id
    checked too: `check_request_id`), or None for one it takes: how `tiermem mcp` answers
    such a line on stdio (tiermem.adapters.mcp_stdio), so that both transports refuse the
    same messages with the same error."""
    try:
        check_json_body(raw, depth_limit(MCP_PATH), jsonrpc=True)
    except _BodyProblem as p:
        return _as_jsonrpc(error_body(p.loc, p.msg, p.type), p.request_id, parsed=p.parsed, code=p.code)
    return None


def json_content_type(value: str) -> bool:
    """True for `application/json` and `application/*+json`, with no charset or UTF-8."""
    media, *params = (part.strip().lower() for part in value.split(";"))
    if not (media == "application/json" or (media.startswith("application/") and media.endswith("+json"))):
        return False
    for param in params:
        key, _, val = param.partition("=")
        if key.strip() == "charset" and val.strip().strip('"') not in ("utf-8", "utf8"):
            return False
    return True


def host_of(value: str) -> str | None:
    """The host part of a Host header (`name`, `name:port`, `[v6]:port`), lower-cased, an
    IPv6 address without brackets; None when it is not of that form."""
    value = value.strip().lower()
    if value.startswith("["):
        addr, sep, rest = value[1:].partition("]")
        if not sep or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
            return None
        return addr
    name, sep, port = value.rpartition(":")
    if not sep:
        name = value
    elif not (port.isdigit() and name and ":" not in name):
        return None
    # a fully qualified name's trailing dot names the same host (`localhost.`)
    name = name[:-1] if name.endswith(".") else name
    return name or None


def origin_host(origin: str) -> str | None:
    """The host an Origin header names (`http://name:port`), as `host_of` gives it; None
    for an opaque origin (`null`) or one that is not http(s)."""
    scheme, sep, rest = origin.strip().partition("://")
    if not sep or scheme.lower() not in ORIGIN_SCHEMES or "/" in rest:
        return None
    return host_of(rest)


class HostCheck:
    """Which Host and Origin a service answers, from its config: DNS rebinding makes a web
    page's own name resolve to the service's address, and the browser then sends that
    name in Host (and the page's origin in Origin), never a local one."""

    def __init__(self, http_host: str, allowed_hosts: Iterable[str]) -> None:
        named = frozenset(allowed_hosts)
        if is_loopback(http_host):
            # the bind address itself too (127.0.0.2 is as local as 127.0.0.1)
            self.allowed: frozenset[str] | None = LOOPBACK_NAMES | named | {http_host.strip("[]").lower()}
        elif named:
            self.allowed = LOOPBACK_NAMES | named  # a probe or an operator on the host itself
        else:
            self.allowed = None  # bound to another address with no names given: the proxy decides

    def refusal(self, path: str, headers: dict[str, str]) -> tuple[int, str] | None:
        """(status, detail) for a request to refuse, else None."""
        if self.allowed is None or path in HOST_UNCHECKED_PATHS:
            return None
        # no Host at all (an HTTP/1.0 client on this machine): no browser sends a request
        # without one, so its absence names no rebound page; the Origin check still runs
        if "host" in headers and host_of(headers["host"]) not in self.allowed:
            return 421, ("this service answers only requests addressed to its own name (Host header); add the "
                         "name to http_allowed_hosts to serve it")
        origin = headers.get("origin")
        if origin is not None and origin_host(origin) not in self.allowed:
            return 403, "requests from pages of another origin are refused (Origin header)"
        return None


class GuardMiddleware(HttpMiddleware):
    """Host and Origin (`HostCheck`), repeated headers, auth (before any body is read),
    body size, content type and the body checks of `check_json_body` on every non-empty
    body; then hands the buffered body to the app."""

    def __init__(self, app: ASGIApp, runtime: Runtime) -> None:
        super().__init__(app, runtime)
        self.hosts = HostCheck(runtime.config.http_host, runtime.config.http_allowed_hosts)

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        # the body's deadline counts from the request as the guard first sees it (its head
        # read whole: the head's own deadline is the server's, tiermem.service.server)
        timeout_s = self.runtime.config.http_body_timeout_s
        deadline = asyncio.get_running_loop().time() + timeout_s
        all_headers: dict[str, list[str]] = {}
        for k, v in scope.get("headers", []):
            all_headers.setdefault(k.decode("latin-1").lower(), []).append(v.decode("latin-1"))
        for name in ("host", "origin"):
            if len(all_headers.get(name, ())) > 1:  # which copy would a browser have meant?
                await _send_json(send, 400, {"detail": f"the {name} header is sent more than once; send it once"})
                return
        path: str = scope.get("path", "")
        refused = self.hosts.refusal(path, {k: v[0] for k, v in all_headers.items()})
        if refused is not None:
            await _send_json(send, refused[0], {"detail": refused[1]})
            return
        for name in SINGLE_HEADERS:
            if len(all_headers.get(name, ())) > 1:
                # the guard and FastAPI could each read a different copy
                await _refuse(send, path, 400, {"detail": f"the {name} header is sent more than once; send it once"})
                return
        if "content-length" in all_headers and "transfer-encoding" in all_headers:
            # RFC 9112 6.1 and 6.3: two framings, which a proxy and this server could each
            # read differently (request smuggling). The server framed it by the chunks and
            # stored it; refused before any of the body is read, and the connection ends
            # here (CLOSE: what remains on the wire is framed by neither for certain)
            await _refuse(send, path, 400, {"detail": FRAMING_CONFLICT_DETAIL}, CLOSE)
            return
        headers = {k: v[0] for k, v in all_headers.items()}
        if path.startswith("/v1/") and self.runtime.auth.grant(headers.get("authorization")) is None:
            await _send_json(
                send, 401, {"detail": "missing or invalid bearer token"}, [(b"www-authenticate", b"Bearer")]
            )
            return
        limit = self.runtime.config.max_body_bytes
        declared = headers.get("content-length")
        if declared is not None:
            if not declared.strip().isdigit():
                await _refuse(send, path, 400, {"detail": "invalid Content-Length"})
                return
            if int(declared) > limit:
                # the body is never read: the connection ends here (CLOSE), so the server
                # does not go on reading the rest of an upload it has refused
                await _refuse(send, path, 413, {"detail": body_limit_detail(limit)}, CLOSE)
                return
        chunks: list[bytes] = []
        total = 0
        while True:
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                # a client that stops mid-body held its connection (and a descriptor) for
                # ever; the rest of the body is never read, so the connection ends here
                await _refuse(send, path, 408, {"detail": body_timeout_detail(timeout_s)}, CLOSE)
                return
            if message["type"] == "http.disconnect":
                return
            body = message.get("body", b"")
            total += len(body)
            if total > limit:  # the rest of the body is never read: as above
                await _refuse(send, path, 413, {"detail": body_limit_detail(limit)}, CLOSE)
                return
            chunks.append(body)
            if not message.get("more_body", False):
                break
        raw = b"".join(chunks)
        if raw:
            # Every body is checked, whatever its Content-Type says: one without a
            # Content-Type is taken for JSON (below), and one FastAPI would not parse has
            # no business here.
            ctype = headers.get("content-type")
            if ctype is not None and not json_content_type(ctype):
                await _refuse(
                    send, path, 415, {"detail": f"Content-Type must be application/json (UTF-8), got {shown(ctype)}"}
                )
                return
            try:
                # an MCP body is a JSON-RPC message: its id is checked too (`check_request_id`)
                check_json_body(raw, depth_limit(path), jsonrpc=path in MCP_PATHS)
            except _BodyProblem as p:
                await _refuse(send, path, 422, error_body(p.loc, p.msg, p.type), request_id=p.request_id,
                              parsed=p.parsed, code=p.code)
                return
            if ctype is None:
                # JSON by default, as the docs say (a client sending bytes it names no type
                # for: httpx's content=, requests' data=): the app parses the body as it has
                # just been checked. FastAPI answered it 422 "Input should be a valid
                # dictionary" on every route
                scope = {**scope, "headers": [*scope.get("headers", []), JSON_CONTENT_TYPE]}
        sent = False

        async def replay() -> MutableMapping[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": raw, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
