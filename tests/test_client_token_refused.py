"""A `tiermem.client` token that no server could take is refused when the client is made,
by the rule `tiermem serve` holds its own tokens to (`tiermem.config.HEADER_TOKEN`:
visible ASCII), with a `ValidationError` naming `token` that never quotes it.

It was sent: httpx refused the header at the first call with
`LocalProtocolError: Illegal header value b'Bearer tok-...\\n'` (a token read from a file
with its newline), the secret in the exception text and so in logs and tracebacks, or
failed to encode it (`UnicodeEncodeError`, a token past ASCII); a token with a space
inside ("Bearer tok-..." given whole) went out and got a 401.

Real HTTP to the real app on a real SQLite file; a token holding the punctuation the rule
allows (`:`, `@`, `"`, `%`) still authenticates.

Fails on the code before: every refused case makes its client (no ValidationError)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hash_embedder import HashEmbedder
from service_helpers import SCOPED_TOKENS, serve_in_thread

from tiermem import Config, Memory
from tiermem.client import AsyncClient, Client
from tiermem.tiers.errors import ValidationError

SECRET = "0123456789abcdef"  # the part of every token below that an error must never show
TOKEN = f"tok-acme-{SECRET}"
PUNCTUATED = f'tok:acme@"%-{SECRET}'  # visible ASCII: the service takes it, so the client sends it

REFUSED = [
    (TOKEN + "\n", "whitespace at an end"),  # read from a file with its newline
    (TOKEN + "\r\n", "whitespace at an end"),  # ... a Windows file's
    (" " + TOKEN, "whitespace at an end"),  # a space before it
    ("Bearer " + TOKEN, "starts with 'Bearer '"),  # the whole header value given as the token
    (f"tok-acme-{SECRET[:8]} {SECRET[8:]}", ""),  # a space inside
    (f"tok-acme-{SECRET}\tx", ""),  # a tab inside
    (f"tök-acme-{SECRET}", ""),  # a character past ASCII: a header is read as Latin-1
    (f"tok-acme-{SECRET}\x00", ""),  # NUL
    (f"tok-acme-{SECRET}\x7f", ""),  # DEL: a control character, past the visible range
]


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("client-token") / "data",
                 auth_tokens={**SCOPED_TOKENS, PUNCTUATED: "punct"})
    with Memory(cfg, embedder=HashEmbedder(), hot=False, background_indexing=False) as mem, \
            serve_in_thread(cfg, mem) as got:
        yield got


@pytest.mark.parametrize("client_type", [Client, AsyncClient])
@pytest.mark.parametrize(("token", "hint"), REFUSED)
def test_a_token_no_server_takes_is_refused_unquoted(url: str, client_type: type[Client | AsyncClient],
                                                     token: str, hint: str) -> None:
    with pytest.raises(ValidationError) as err:
        client_type(url, token=token)
    assert err.value.field == "token"
    assert "visible ASCII" in err.value.problem and "nothing was sent" in err.value.problem
    assert hint in err.value.problem
    for text in (str(err.value), repr(err.value)):
        assert SECRET[:8] not in text and SECRET[8:] not in text


def test_a_token_of_visible_punctuation_still_authenticates(url: str, tmp_path: Path) -> None:
    with Client(url, token=PUNCTUATED) as client:
        assert client.append(f"c-{tmp_path.name}", {"role": "user", "content": "hi"}) == 0
        assert [m.body["content"] for m in client.history(f"c-{tmp_path.name}")] == ["hi"]
