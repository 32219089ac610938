"""A conditional append refused for its position says whether the conversation exists,
the same in the library, the HTTP service's 409 and its client (tiers.store
`check_expected`, tiers.errors `PositionMismatch`, tiermem.client `_mismatch`):

- `found_incarnation`: the conversation's incarnation now (the token its appends
  answer), null only where no conversation of that id exists, whatever was mismatched;
- `exists`: true where it exists, false where it does not; never None from a server
  that says `found_incarnation`.

Before (review r_docs, session 35; a regression of 404e86c), a plain position mismatch
named no incarnation, so the 409 said `found_incarnation: null` ("no conversation of that
id exists") for a conversation that exists, and the client raised it with
`exists=False` while the library said None.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from hash_embedder import HashEmbedder
from service_helpers import SCOPED_TOKENS, TOKEN_ACME, serve_in_thread

from tiermem import Config, Memory
from tiermem.client import Client
from tiermem.errors import PositionMismatch

NS = "acme"  # TOKEN_ACME's namespace
MSG = {"role": "user", "content": "Book the 9:40 to Lisbon, please."}
AT_ONE = "at-one"  # a conversation going on at position 1
ABSENT = "absent"  # no conversation of that id

CASES = [
    # (conversation, expect_position, found_position, exists)
    (AT_ONE, 0, 1, True),   # expected new, it exists: before, found_incarnation null, client exists False
    (AT_ONE, 5, 1, True),   # expected further on than it is
    (ABSENT, 3, 0, False),  # none: it stays none (the one the append would create is rolled back)
]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Memory, str]]:
    """(URL, the server's Memory, AT_ONE's incarnation token)."""
    cfg = Config(data_dir=tmp_path_factory.mktemp("mismatch-exists") / "data", auth_tokens=SCOPED_TOKENS)
    with Memory(cfg, embedder=HashEmbedder(), hot=False, background_indexing=False) as mem, \
            serve_in_thread(cfg, mem) as url:
        token = mem.append_outcome(AT_ONE, [MSG], namespace=NS).incarnation
        assert token is not None
        yield url, mem, token


def _now(conv: str, token: str) -> str | None:
    return token if conv == AT_ONE else None


@pytest.mark.parametrize(("conv", "expect", "found", "exists"), CASES)
def test_the_library_names_the_incarnation_now(served: tuple[str, Memory, str], conv: str, expect: int,
                                               found: int, exists: bool) -> None:
    _, mem, token = served
    with pytest.raises(PositionMismatch) as err:
        mem.append_outcome(conv, [MSG], namespace=NS, expect_position=expect)
    e = err.value
    assert (e.found, e.found_incarnation, e.exists) == (found, _now(conv, token), exists)
    assert str(e).endswith(f"but goes on at position {found}; nothing was written"), str(e)


@pytest.mark.parametrize(("conv", "expect", "found", "exists"), CASES)
def test_the_409_body_and_the_client_agree_with_the_library(served: tuple[str, Memory, str], conv: str,
                                                            expect: int, found: int, exists: bool) -> None:
    url, mem, token = served
    with Client(url, token=TOKEN_ACME, namespace=NS) as client:
        res = httpx.post(f"{url}/v1/conversations/{conv}/messages", json={**MSG, "expect_position": expect},
                         headers={"Authorization": f"Bearer {TOKEN_ACME}"})
        assert res.status_code == 409, res.text
        body = res.json()
        assert (body["found_position"], body["found_incarnation"]) == (found, _now(conv, token)), body
        with pytest.raises(PositionMismatch) as err:
            client.append(conv, MSG, expect_position=expect)
    e = err.value
    assert (e.found, e.found_incarnation, e.exists) == (found, _now(conv, token), exists)
    # nothing written, nothing created
    assert (conv in mem.conversations(NS)) is exists
    if exists:
        assert len(mem.history(conv, namespace=NS)) == found
