"""An idempotency key is checked at the edge (`tiers.models.check_idempotency_key`):
1..MAX_IDEMPOTENCY_KEY_CHARS visible ASCII characters, what an HTTP header carries
unchanged. A bad one is refused naming the field and the limit, and nothing is written,
not even a conversation."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hash_embedder import HashEmbedder

from tiermem.config import Config
from tiermem.memory import Memory
from tiermem.tiers.errors import LimitExceeded, ValidationError
from tiermem.tiers.models import MAX_IDEMPOTENCY_KEY_CHARS, check_idempotency_key

MSG = {"role": "user", "content": "hi"}

# (key, accepted, what the refusal says)
CASES: list[tuple[str, object, bool, str]] = [
    ("uuid", "7f0c2a5e-3b1d-4c8e-9f2a-0d6b1e4c7a93", True, ""),  # the common form
    ("one_char", "a", True, ""),  # the shortest
    ("longest", "k" * MAX_IDEMPOTENCY_KEY_CHARS, True, ""),  # exactly at the limit
    ("every_visible_ascii", "".join(chr(c) for c in range(0x21, 0x7F)), True, ""),  # 0x21..0x7E, quotes too
    ("too_long", "k" * (MAX_IDEMPOTENCY_KEY_CHARS + 1), False, f"limit of {MAX_IDEMPOTENCY_KEY_CHARS} characters"),
    ("empty", "", False, f"1..{MAX_IDEMPOTENCY_KEY_CHARS} characters"),  # no key is None, not ""
    ("space", "two words", False, "visible ASCII"),  # 0x20 is not visible
    ("tab", "a\tb", False, "visible ASCII"),  # a control character
    ("newline", "a\nb", False, "visible ASCII"),  # would split the header
    ("trailing_newline", "abc\n", False, "visible ASCII"),  # `$` would have let it through
    ("del", "a\x7fb", False, "visible ASCII"),  # 0x7F
    ("nul", "a\x00b", False, "visible ASCII"),  # NUL
    ("non_ascii", "clé", False, "visible ASCII"),  # outside ASCII
    ("lone_surrogate", "a\ud800", False, "visible ASCII"),  # not even valid Unicode
    ("int", 42, False, "must be a string"),  # not a string
    ("bytes", b"abc", False, "must be a string"),  # bytes are not a str
]


@pytest.mark.parametrize(("key", "ok", "says"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_check_idempotency_key(key: object, ok: bool, says: str) -> None:
    if ok:
        assert check_idempotency_key(key) == key
        return
    with pytest.raises(ValidationError, match=says) as err:
        check_idempotency_key(key)
    assert err.value.field == "idempotency_key"


def test_a_key_over_the_limit_is_a_limit_exceeded() -> None:
    with pytest.raises(LimitExceeded) as err:
        check_idempotency_key("k" * (MAX_IDEMPOTENCY_KEY_CHARS + 1))
    assert (err.value.value, err.value.limit) == (MAX_IDEMPOTENCY_KEY_CHARS + 1, MAX_IDEMPOTENCY_KEY_CHARS)


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=HashEmbedder(), hot=False,
                background_indexing=False) as m:
        yield m


REFUSED = [c for c in CASES if not c[2]]


@pytest.mark.parametrize(("key", "says"), [(c[1], c[3]) for c in REFUSED], ids=[c[0] for c in REFUSED])
@pytest.mark.parametrize("call", ["append", "append_many", "append_outcome", "namespaced"])
def test_memory_refuses_a_bad_key_and_writes_nothing(mem: Memory, key: object, says: str, call: str) -> None:
    with pytest.raises(ValidationError, match=says) as err:
        if call == "append":
            mem.append("c", MSG, idempotency_key=key)  # type: ignore[arg-type]
        elif call == "append_many":
            mem.append_many("c", [MSG], idempotency_key=key)  # type: ignore[arg-type]
        elif call == "append_outcome":
            mem.append_outcome("c", [MSG], idempotency_key=key)  # type: ignore[arg-type]
        else:
            mem.namespaced("acme").append_many("c", [MSG], idempotency_key=key)  # type: ignore[arg-type]
    assert err.value.field == "idempotency_key"
    assert mem.stats()["cold"]["conversations"] == 0 and mem.stats()["cold"]["messages"] == 0


def test_the_key_is_checked_before_the_messages(mem: Memory) -> None:
    # a bad key and a bad message: the key is named (checked first, at the edge)
    with pytest.raises(ValidationError) as err:
        mem.append_many("c", [{"role": "nobody"}], idempotency_key="a b")
    assert err.value.field == "idempotency_key"
