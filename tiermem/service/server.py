"""How `tiermem serve` runs uvicorn: deadlines on a request's head and a bound on connections.

uvicorn (h11; httptools alike) has no deadline on a request's head: a connection that
sends part of its headers, or nothing, stays open forever, and its keep-alive timer is
cancelled by any byte of the next request's head. A few hundred such connections held
every file descriptor the process may open; accept then failed (EMFILE) and nobody,
/healthz included, was answered until they left. The body's deadline is the guard's
(`guard.GuardMiddleware`, `config.http_body_timeout_s`, 408).

Invariants:
- every request head arrives whole within `config.http_header_timeout_s` of the
  connection's opening or of the end of its previous answer, or the connection is closed
  (no answer: there is no request to answer yet);
- a connection idle after an answer is closed after `KEEP_ALIVE_TIMEOUT_S`;
- a client that half-closes (FIN) after a whole request still gets its answer, and so does
  every whole request it pipelined before the FIN, in order; the connection is closed after
  the last of them (`GuardedH11Protocol.eof_received`);
- at most `config.http_max_connections` connections (open, in flight or idle) are served
  at once: a request that arrives past it, or while as many requests are in flight, is
  answered 503 with `Retry-After: OVERLOAD_RETRY_AFTER_S` and the error JSON, its
  connection closed, before the app sees it; /healthz (`LIMIT_EXEMPT_PATHS`) is still
  served, so that a probe tells a busy process from a dead one. This is uvicorn's
  `limit_concurrency`, whose own 503 has no Retry-After and counts one connection fewer;
- those 503s are logged at most once per `OVERLOAD_LOG_INTERVAL_S` a server (the first of a
  burst at once, then one line with the count of those since): a flood of refused
  requests wrote one warning each, filling the log (`OverloadLog`).

uvicorn cannot refuse to accept a connection, so the bound answers excess requests fast
but a flood of connections that never send a head still holds a descriptor each for up to
the head deadline: in front of the open internet, a proxy (nginx's client_header_timeout,
limit_conn) is the place for that.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING, Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from tiermem.config import DEFAULT_HTTP_HEADER_TIMEOUT_S

if TYPE_CHECKING:
    from tiermem.config import Config
    from tiermem.service.asgi import Receive, Scope, Send

log = logging.getLogger("tiermem.service")

KEEP_ALIVE_TIMEOUT_S = 5  # seconds an idle connection stays open after an answer (uvicorn's default)
OVERLOAD_RETRY_AFTER_S = 1  # seconds: connections come and go quickly; the client retries soon
LIMIT_EXEMPT_PATHS = frozenset({"/healthz"})  # a probe must see a busy process alive
OVERLOAD_DETAIL = "the server is serving as many connections as it may (http_max_connections); retry shortly"
# seconds: at most one warning about the 503s of the connection bound per interval, with
# the count of those answered since the last (a flood is thousands a second)
OVERLOAD_LOG_INTERVAL_S = 10.0


class OverloadLog:
    """The warnings of one server's overload 503s: the first at once, then at most one per
    interval, saying how many were answered since the last line. Used from the server's
    event loop only (no lock)."""

    def __init__(self) -> None:
        self.unlogged = 0  # 503s answered since the last line
        self._timer: asyncio.TimerHandle | None = None  # set while an interval runs

    def refused(self, loop: asyncio.AbstractEventLoop, limit: int, interval_s: float) -> None:
        if self._timer is not None:
            self.unlogged += 1
            return
        log.warning("connection limit reached (http_max_connections = %d): answered 503", limit)
        self._timer = loop.call_later(interval_s, self._interval_ended, loop, limit, interval_s)

    def _interval_ended(self, loop: asyncio.AbstractEventLoop, limit: int, interval_s: float) -> None:
        self._timer = None
        if not self.unlogged:
            return  # the burst is over: the next 503 is logged at once
        log.warning("connection limit reached (http_max_connections = %d): answered 503 to %d more request(s) "
                    "in the last %g s", limit, self.unlogged, interval_s)
        self.unlogged = 0
        # a flood that goes on is one line per interval
        self._timer = loop.call_later(interval_s, self._interval_ended, loop, limit, interval_s)


async def _overloaded(send: Send) -> None:
    payload = json.dumps({"detail": OVERLOAD_DETAIL}).encode()
    await send({
        "type": "http.response.start",
        "status": 503,
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(payload)).encode()),
            (b"retry-after", str(OVERLOAD_RETRY_AFTER_S).encode()),
            (b"connection", b"close"),  # the body may be unread: this connection ends here
        ],
    })
    await send({"type": "http.response.body", "body": payload})


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline on every request head and a bound on the
    connections served (the module's invariants). Set the class attributes in a subclass
    (`protocol_class`)."""

    header_timeout_s: float = DEFAULT_HTTP_HEADER_TIMEOUT_S
    max_connections: int | None = None  # None: no bound
    overload_log_interval_s: float = OVERLOAD_LOG_INTERVAL_S
    overload_log = OverloadLog()  # one per class (__init_subclass__): every connection of a server shares it

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.overload_log = OverloadLog()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None
        self._armed_for: object = None  # the request cycle the head deadline was armed after
        self._half_closed = False  # the client sent its FIN with whole requests still to answer
        served = self.app

        async def app(scope: Scope, receive: Receive, send: Send) -> None:
            # this connection and this request's task are already counted
            limit = self.max_connections
            if (limit is not None and scope["type"] == "http" and scope["path"] not in LIMIT_EXEMPT_PATHS
                    and (len(self.connections) > limit or len(self.tasks) > limit)):
                self.overload_log.refused(self.loop, limit, self.overload_log_interval_s)
                await _overloaded(send)
                return
            await served(scope, receive, send)

        self.app = app

    def _arm_head_deadline(self) -> None:
        """Close the connection unless a new request's head has arrived whole within
        `header_timeout_s`: a head's arrival starts a new request cycle."""
        if self._head_timer is not None:
            self._head_timer.cancel()
        self._armed_for = self.cycle
        self._head_timer = self.loop.call_later(self.header_timeout_s, self._head_deadline)

    def _head_deadline(self) -> None:
        self._head_timer = None
        if self.cycle is self._armed_for and not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_deadline()

    def on_response_complete(self) -> None:
        # armed before the base class goes on to a pipelined request (a new cycle), so that
        # a head already here does not count against the deadline
        if not self.transport.is_closing():
            self._arm_head_deadline()
        super().on_response_complete()  # starts the next request h11 holds whole, if any
        if self._half_closed and not self.transport.is_closing():
            self._after_half_close()

    def _pipelined(self) -> bool:
        """Whether h11 holds bytes past the request in flight (pipelined requests)."""
        return bool(self.conn.trailing_data[0])

    def _after_half_close(self) -> None:
        """The client sends nothing more: answer the request in flight where it is whole
        (the last one closes the connection after its answer: `keep_alive` off), else close."""
        cycle = self.cycle
        if cycle is None or cycle.response_complete or cycle.more_body:
            self.transport.close()  # nothing whole left to answer (a body cut short cannot arrive)
        elif not self._pipelined():
            cycle.keep_alive = False  # `RequestResponseCycle.send` closes the transport after the answer

    def eof_received(self) -> bool:  # type: ignore[override]  # asyncio.Protocol: bool | None
        """The client half-closed (sent FIN: `shutdown(SHUT_WR)`, `curl --data` with some
        proxies, `nc -N`). With a whole request in flight, keep the connection open to answer
        it, then close it (`keep_alive` off: the client sends nothing more); otherwise close it
        now, as before (no request to answer, or one whose body can no longer arrive: its app
        sees the disconnect).

        uvicorn's H11Protocol returns None here, which makes asyncio close the transport: the
        request's app ran on, its write committed, and its answer was dropped (the client
        read 0 bytes and could not tell a stored append from a lost one).

        Requests pipelined before the FIN (h11 holds them while one is in flight) are each
        answered in turn (`on_response_complete` starts the next), the connection closed
        after the last (`_after_half_close`): closing it after the one in flight answered
        only the first. Called again where reading resumes after the FIN (asyncio reads the
        FIN again): the connection stays open while requests are answered."""
        if self._half_closed:
            return True
        cycle = self.cycle
        if cycle is None or cycle.response_complete or cycle.more_body:
            return False
        self._half_closed = True
        self._after_half_close()
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        super().connection_lost(exc)


def protocol_class(config: Config) -> type[GuardedH11Protocol]:
    """`GuardedH11Protocol` with `config`'s head deadline and connection bound."""
    return type("ServeProtocol", (GuardedH11Protocol,), {
        "header_timeout_s": config.http_header_timeout_s,
        "max_connections": config.http_max_connections,
    })


def uvicorn_options(config: Config) -> dict[str, Any]:
    """The options `uvicorn.run` takes from `config` (besides the app, host, port and logging):
    also the proxies whose forwarded headers make a request https (`http_forwarded_allow_ips`)."""
    return {
        "http": protocol_class(config),  # h11 even where httptools is installed: one behaviour
        "timeout_keep_alive": KEEP_ALIVE_TIMEOUT_S,
        # uvicorn's own limit_concurrency stays off: the protocol answers it, with Retry-After
        "limit_concurrency": None,
        # None: uvicorn's own default (FORWARDED_ALLOW_IPS, else loopback), as before the setting
        "forwarded_allow_ips": config.http_forwarded_allow_ips,
    }
