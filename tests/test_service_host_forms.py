"""The DNS-rebinding check (service.guard.HostCheck) on a loopback bind answers every
spelling of a local name and refuses every other: a fully qualified name's trailing dot
(`localhost.`) is the same host, and a request with no Host at all (an HTTP/1.0 client on
the machine; no browser sends one without) is not a rebound page.

On the code before, `localhost.`, `127.0.0.1.:8000` and a missing Host got 421."""

from __future__ import annotations

import pytest

from tiermem.service.guard import HostCheck

LOCAL = HostCheck("127.0.0.1", [])

# (headers, expected status or None for answered)
CASES = [
    ({"host": "localhost"}, None),  # the plain name
    ({"host": "localhost."}, None),  # fully qualified: the same host
    ({"host": "127.0.0.1.:8000"}, None),  # with a port
    ({"host": "LOCALHOST:80"}, None),  # names are case-insensitive
    ({}, None),  # HTTP/1.0 without Host
    ({"origin": "http://evil.example"}, 403),  # no Host, but a page of another origin
    ({"host": "evil.example"}, 421),  # the rebound page
    ({"host": "evil.example."}, 421),  # its trailing dot changes nothing
    ({"host": "localhost.evil.example"}, 421),  # a local name as a label of another
    ({"host": "localhost.."}, 421),  # one trailing dot only
    ({"host": ""}, 421),  # an empty Host is not a name
]


@pytest.mark.parametrize(("headers", "status"), CASES)
def test_local_spellings_are_answered_and_others_refused(headers: dict[str, str], status: int | None) -> None:
    got = LOCAL.refusal("/v1/stats", headers)
    assert (got[0] if got else None) == status, got
