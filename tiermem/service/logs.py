"""What `tiermem serve` writes to its log: uvicorn's, with request lines cut at the path.

Invariant: no query string reaches the log. An access log outlives erasure (log files are
rotated and shipped, never scrubbed), so it may hold what an erasure report's tombstone
holds anyway (paths: routes and conversation ids; times, statuses, client addresses) and
never content: the text of a search (`GET /v1/search?q=`) or any other query parameter.
`POST /v1/search` keeps the query out of the URL for clients and proxies too.

The client field is an IP address and port, or else shown quoted and escaped in brackets
(`EscapeClient`): behind `http_forwarded_allow_ips = ["*"]` it is whatever X-Forwarded-For
said, and a value such as `10.9.9.9:1 - "DELETE /v1/namespace HTTP/1.1" 200 OK | real:` made
a line that read as a request no one sent.
"""

from __future__ import annotations

import copy
import ipaddress
import json
import logging
from typing import Any

ACCESS_LOGGER = "uvicorn.access"
PACKAGE_LOGGER = "tiermem"  # every module's logger is below it (logging.getLogger(__name__))
# the positions in uvicorn's access record: (client, method, path, http version, status)
ACCESS_CLIENT_ARG = 0
ACCESS_PATH_ARG = 2
CLIENT_SHOWN_CHARS = 100  # of a client field that is no address: enough to recognise, no more


def shown_client(client: str) -> str:
    """uvicorn's client field (`host:port`, "" when unknown) as the access log shows it:
    unchanged when the host is an IP address and the port a number, else as a JSON string
    (quotes, backslashes, control characters and non-ASCII escaped) cut to
    CLIENT_SHOWN_CHARS, in brackets: `[client "..."]`, which no address looks like."""
    host, _, port = client.rpartition(":")
    try:
        ipaddress.ip_address(host)
        plain = port.isascii() and port.isdigit()
    except ValueError:
        plain = False
    if plain or client == "":
        return client
    cut = client[:CLIENT_SHOWN_CHARS] + ("..." if len(client) > CLIENT_SHOWN_CHARS else "")
    return f"[client {json.dumps(cut)}]"


class DropQueryString(logging.Filter):
    """Cut the path of an access-log record at its `?`, and show a client field that is
    no IP address escaped (`shown_client`). Both on the logger and its handler: the same
    record passes twice, and each step leaves a record it already changed as it is."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) > ACCESS_PATH_ARG:
            client, path = args[ACCESS_CLIENT_ARG], args[ACCESS_PATH_ARG]
            if isinstance(client, str) and not client.startswith("[client "):
                client = shown_client(client)
            if isinstance(path, str):
                path = path.split("?", 1)[0]
            record.args = (client, *args[ACCESS_CLIENT_ARG + 1:ACCESS_PATH_ARG], path, *args[ACCESS_PATH_ARG + 1:])
        return True


def log_config(level: str = "info") -> dict[str, Any]:
    """uvicorn's own logging config, with `DropQueryString` on its access logger and
    handler (a handler an operator adds to the logger gets cut records too), and
    tiermem's own loggers at `level` (`serve --log-level`): their records go on to the
    root handler the CLI set up. Without it they sat at the CLI's WARNING, so what the
    service logs for the operator at INFO (an erasure's bytes reclaimed, the hot tier's
    recovery) was never written."""
    from uvicorn.config import LOGGING_CONFIG

    config: dict[str, Any] = copy.deepcopy(LOGGING_CONFIG)
    config["loggers"][PACKAGE_LOGGER] = {"level": level.upper()}
    config.setdefault("filters", {})["drop_query_string"] = {"()": DropQueryString}
    config["loggers"][ACCESS_LOGGER].setdefault("filters", []).append("drop_query_string")
    config["handlers"]["access"].setdefault("filters", []).append("drop_query_string")
    return config
