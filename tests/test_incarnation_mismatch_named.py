"""A conditional append refused for its `expect_incarnation` says what is true: the
incarnation expected (as sent) and the conversation's incarnation now, or that no
conversation of that id exists now (tiers.errors `PositionMismatch`, tiers.store
`check_expected`). Never "erased or pruned since" for a token the conversation never had:
an opaque token cannot tell a made-up value from an erased incarnation's, so neither is
claimed. The same in the library, the HTTP service's 409 (`found_incarnation` too) and its
client.

Before (an operator's report, session 35), every such refusal read "was erased or pruned
since", also for a token of the right shape that no incarnation ever had.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from hash_embedder import HashEmbedder

from tiermem import Config, Memory
from tiermem.errors import PositionMismatch
from tiermem.service import create_app

NS = "tenant"
MADE_UP = "0123456789abcdef" * 2  # an incarnation's shape, which no conversation ever had


def say(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=HashEmbedder(), hot=False,
                background_indexing=False) as m:
        yield m


def made_up(mem: Memory) -> tuple[str, str | None]:
    """A live conversation, a token it never had: (token sent, incarnation now)."""
    now = mem.append_outcome("c", [say("a")], namespace=NS).incarnation
    return MADE_UP, now


def erased_and_written_again(mem: Memory) -> tuple[str, str | None]:
    old = mem.append_outcome("c", [say("a")], namespace=NS).incarnation
    assert old is not None
    mem.delete_conversation("c", namespace=NS)
    now = mem.append_outcome("c", [say("b")], namespace=NS).incarnation
    return old, now


def erased(mem: Memory) -> tuple[str, str | None]:
    old = mem.append_outcome("c", [say("a")], namespace=NS).incarnation
    assert old is not None
    mem.delete_conversation("c", namespace=NS)
    return old, None


CASES = [
    made_up,                   # a token of the right shape it never had: not "erased"
    erased_and_written_again,  # its old incarnation's token: the new one named
    erased,                    # none now: said so, and not re-created
]


@pytest.mark.parametrize("case", CASES)
def test_the_library_names_both_incarnations(mem: Memory, case: object) -> None:
    assert callable(case)
    sent, now = case(mem)
    with pytest.raises(PositionMismatch) as err:
        mem.append_outcome("c", [say("z")], namespace=NS, expect_position=1, expect_incarnation=sent)
    text = str(err.value)
    assert "erased or pruned" not in text, text  # before: "but was erased or pruned since"
    assert f"expected to be incarnation '{sent}', going on at position 1" in text, text
    if now is None:
        assert text.endswith("but no conversation of that id exists now; nothing was written"), text
        assert "c" not in mem.conversations(NS)
    else:
        assert text.endswith(f"but its incarnation is '{now}'; nothing was written"), text
    assert (err.value.found, err.value.expected_incarnation, err.value.found_incarnation) == (None, sent, now)


@pytest.mark.parametrize("case", CASES)
def test_the_services_409_names_both_incarnations(mem: Memory, case: object) -> None:
    assert callable(case)
    sent, now = case(mem)
    app = create_app(mem.config, mem, auth=False, namespace=NS, start_scheduler=False)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        res = client.post("/v1/conversations/c/messages",
                          json={**say("z"), "expect_position": 1, "expect_incarnation": sent})
    assert res.status_code == 409, res.text
    body = res.json()
    assert (body["found_position"], body["expected_incarnation"], body["found_incarnation"]) == (None, sent, now)
    assert "erased or pruned" not in body["detail"] and f"incarnation '{sent}'" in body["detail"], body
