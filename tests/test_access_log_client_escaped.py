"""The access log's client field is an IP address and port, or else shown quoted and
escaped in brackets (tiermem.service.logs.shown_client). Behind
`http_forwarded_allow_ips = ["*"]` it is whatever X-Forwarded-For said; before, a value
such as `10.9.9.9:1 - "DELETE /v1/namespace HTTP/1.1" 200 OK | real:` was written as is,
and the line read as a DELETE no one sent.

The record goes through the filter the service's logging config installs and uvicorn's own
access formatter, as `tiermem serve` writes it."""

from __future__ import annotations

import logging

import pytest
from uvicorn.logging import AccessFormatter

from tiermem.service.logs import DropQueryString, log_config

FORGED = '10.9.9.9:1 - "DELETE /v1/namespace HTTP/1.1" 200 OK | real:'


def access_line(client: str, path: str = "/v1/limits") -> str:
    """The line `tiermem serve` writes for a GET of `path` from `client` answered 401."""
    record = logging.LogRecord("uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d',
                               (client, "GET", path, "1.1", 401), None)
    config = log_config()
    assert config["filters"]["drop_query_string"]["()"] is DropQueryString
    for _ in ("logger", "handler"):  # both carry the filter: a record passes it twice
        assert DropQueryString().filter(record)
    return AccessFormatter(config["formatters"]["access"]["fmt"], use_colors=False).format(record)


@pytest.mark.parametrize(("client", "shown"), [
    ("203.0.113.5:4242", "203.0.113.5:4242"),  # an IPv4 address: as uvicorn wrote it
    ("::1:4242", "::1:4242"),  # an IPv6 address (uvicorn writes it unbracketed)
    ("", ""),  # no client known
    (f"{FORGED}:0", '[client "10.9.9.9:1 - \\"DELETE /v1/namespace HTTP/1.1\\" 200 OK | real::0"]'),  # forged
    ("evil\nINFO: 1.2.3.4:1 - \"GET / HTTP/1.1\" 200:0", '[client "evil\\nINFO: 1.2.3.4:1 - \\"GET / HTTP/1.1\\" 200:0"]'),  # a line break
    ("proxy.example:0", '[client "proxy.example:0"]'),  # a host name: no address either
    ("1.2.3.4:x", '[client "1.2.3.4:x"]'),  # an address with no numeric port
    ("\u00e9" * 150 + ":0", '[client "' + "\\u00e9" * 100 + '..."]'),  # long, non-ASCII: escaped and cut
])
def test_client_field(client: str, shown: str) -> None:
    line = access_line(client)
    assert line == f'INFO:     {shown} - "GET /v1/limits HTTP/1.1" 401 Unauthorized'
    assert "\n" not in line


def test_forged_line_reads_no_delete() -> None:
    line = access_line(f"{FORGED}:0", "/v1/limits?q=secret")
    assert ' - "DELETE' not in line  # its quotes escaped: no request line but the real one
    assert line.count('"GET /v1/limits HTTP/1.1"') == 1 and "secret" not in line
