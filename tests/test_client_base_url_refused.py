"""A `tiermem.client` base URL that carries a user name or password (`http://user:pw@host`),
a query or fragment, no host or a bad port is refused when the client is made, with a
`ValidationError` (a ValueError) naming `base_url` that shows the URL only redacted: no
password, however its userinfo is written.

tiermem authenticates by bearer token alone. Such a URL was taken: httpx sent the userinfo
as basic auth in place of the client's Bearer token (a 401 from a real `tiermem serve`),
logged it in its INFO request line ("HTTP Request: GET http://user:PW@host/..."), and the
client's own errors quoted it (`got 'user:PW@host'` for a URL without its scheme, "the
server at http://user:PW@host ..."), so into callers' logs and tracebacks. A query or
fragment swallowed the `/v1/...` path the client appends to the URL.

Real HTTP to the real app on a real SQLite file for the cases a server answers.

Fails on the code before: every refused case but the scheme-less and `ftp://` ones makes
its client (no ValidationError); those two quote the password."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from service_helpers import SCOPED_TOKENS, TOKEN_ACME, served_store

from tiermem import Config
from tiermem.client import AsyncClient, Client
from tiermem.tiers.errors import ValidationError

SECRET = "s3cr3t-pw-0123456789"  # the password in every URL below: no error may show it
HOST = "memory.internal:8080"

# (base_url, what the refusal says)
REFUSED = [
    (f"http://alice:{SECRET}@{HOST}", "no user name or password"),  # the plain form
    (f"https://alice:{SECRET}@{HOST}/tiermem", "no user name or password"),  # https, a proxy prefix
    (f"http://:{SECRET}@{HOST}", "no user name or password"),  # a password without a user
    (f"http://{SECRET}@{HOST}", "no user name or password"),  # a token put where a user goes
    (f"http://alice:{SECRET[:6]}%40{SECRET[6:]}@{HOST}", "no user name or password"),  # percent-encoded '@'
    (f"http://alice:{SECRET[:6]}/{SECRET[6:]}@{HOST}", "no user name or password"),  # an unescaped '/': urlsplit's netloc ends before the '@'
    (f"http://alice:{SECRET[:6]}@{SECRET[6:]}@{HOST}", "no user name or password"),  # an unescaped '@' in it
    (f"http://alice:{SECRET[:6]}#{SECRET[6:]}@{HOST}", "no user name or password"),  # an unescaped '#' in it
    (f"http://alice:{SECRET[:6]}?{SECRET[6:]}@{HOST}", "no user name or password"),  # an unescaped '?' in it
    (f"alice:{SECRET}@{HOST}", "http:// or https://"),  # no scheme: quoted whole before
    (f"ftp://alice:{SECRET}@{HOST}", "http:// or https://"),  # another scheme
    (f"http://{HOST}/?token={SECRET}", "no query"),  # a secret-looking query value
    (f"http://{HOST}/?", "no query"),  # an empty query: the client's path would follow the '?'
    (f"http://{HOST}#{SECRET}", "no fragment"),  # a fragment
    ("http://", "name a host"),  # no host
    ("http://memory.internal:99999", "invalid port"),  # a port past 65535
]


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("client-base-url") / "data", auth_tokens=SCOPED_TOKENS)
    with served_store(cfg) as served:
        yield served.url


@pytest.mark.parametrize("client_type", [Client, AsyncClient])
@pytest.mark.parametrize(("base_url", "says"), REFUSED)
def test_a_base_url_with_userinfo_or_no_place_for_the_path_is_refused_redacted(
        client_type: type[Client | AsyncClient], base_url: str, says: str) -> None:
    with pytest.raises(ValidationError) as err:
        client_type(base_url, token=TOKEN_ACME)
    for text in (str(err.value), repr(err.value)):  # first: before, the scheme-less and ftp ones quoted it
        assert SECRET[:6] not in text and SECRET[6:] not in text
    assert isinstance(err.value, ValueError)
    assert err.value.field == "base_url"
    assert says in err.value.problem and "nothing was sent" in err.value.problem


def test_userinfo_is_refused_before_it_replaces_the_token_on_a_real_server(url: str) -> None:
    # before: httpx sent basic auth for alice in place of the Bearer token, and the
    # server answered 401 to a client holding a valid token
    with_userinfo = url.replace("http://", f"http://alice:{SECRET}@", 1)
    with pytest.raises(ValidationError) as err:
        Client(with_userinfo, token=TOKEN_ACME)
    assert err.value.field == "base_url" and "bearer token" in err.value.problem
    assert SECRET not in str(err.value)


# (suffix added to the served URL) a base URL the client still takes, answered by the server
ACCEPTED = [
    "",  # as served
    "/",  # a trailing slash: stripped, not doubled before /v1
    "//",  # several
]


@pytest.mark.parametrize("suffix", ACCEPTED)
def test_a_plain_base_url_still_works(url: str, suffix: str, tmp_path: Path) -> None:
    conv = f"c-{tmp_path.name}"
    with Client(url + suffix, token=TOKEN_ACME) as client:
        assert client.append(conv, {"role": "user", "content": "hi"}) == 0
        assert [m.body["content"] for m in client.history(conv)] == ["hi"]
