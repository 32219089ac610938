"""`parse_message`'s error from pydantic quotes at most MAX_SHOWN_CHARS of a caller's key.

A library caller's metadata key that is no string is refused by pydantic, whose location
holds the key as its str: `parse_message` joined that location whole into the field, so a
tuple key holding a 100,000-character string gave a 100,052-character error (a key
object with a long repr, a frozenset, an int of thousands of digits: the same). The
location is now named up to its first part that is no plain name, and the rest quoted
and cut (`tiers.errors.shown_key`), the one bound of a22be8b. Real SQLite.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tiermem import Config, Memory
from tiermem.errors import ValidationError
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.errors import MAX_SHOWN_CHARS
from tiermem.tiers.models import parse_message

CONV = "c"
HUGE_CHARS = 100_000
HUGE = "x" * HUGE_CHARS
# the most digits an int's str gives (Python's limit): pydantic writes a key past int64 so
LONG_INT_DIGITS = 4_000
CUT = "..."  # what `shown` puts after a cut quote
LIMITS = {"max_content_bytes": 1 << 20, "max_metadata_bytes": 1 << 20}  # the library's own, above any case
MESSAGE = {"role": "user", "content": "hi"}


class Key:
    """A caller's own hashable key type, shown by its repr."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


# each case: a metadata key that is no string, built from a short and a long text (the
# short one gives the shortest error of the case, the long one the longest)
CASES: dict[str, tuple[Callable[[str], Any], str, str]] = {
    # a tuple holding a 100,000-character string
    "tuple": (lambda t: (t,), "x", HUGE),
    # a frozenset, the same
    "frozenset": (lambda t: frozenset({t}), "x", HUGE),
    # a key object whose repr is 100,000 characters (a short one that is no plain name)
    "object": (Key, "-", HUGE),
    # an int of thousands of digits (past int64 pydantic writes its digits)
    "long int": (lambda t: int(t), "1" + "0" * 30, "1" + "0" * LONG_INT_DIGITS),
}


@pytest.fixture
def mem(tmp_path: Path, embedder: FastEmbedder) -> Iterator[Memory]:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False,
                background_indexing=False) as m:
        yield m


def by_parse(_mem: Memory, metadata: dict[Any, Any]) -> str:
    with pytest.raises(ValidationError) as info:
        parse_message(MESSAGE, metadata=metadata, **LIMITS)
    return str(info.value)


def by_append(mem: Memory, metadata: dict[Any, Any]) -> str:
    with pytest.raises(ValidationError) as info:
        mem.append(CONV, MESSAGE, metadata=metadata)
    return str(info.value)


WAYS = {"parse_message": by_parse, "append": by_append}


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("case", CASES)
def test_the_longest_error_of_a_key_quotes_at_most_the_bound(mem: Memory, case: str, way: str) -> None:
    build, short, long = CASES[case]
    shortest = WAYS[way](mem, {build(short): 1})
    key = build(long)
    longest = WAYS[way](mem, {key: 1})
    assert str(key)[: MAX_SHOWN_CHARS + 1] not in longest
    assert len(longest) <= len(shortest) + MAX_SHOWN_CHARS + len(CUT), longest[:1000]
    assert mem.conversations("default") == []  # nothing written


@pytest.mark.parametrize(("key", "field"), [
    # an int key: its location is plain, the field as before
    (1, "metadata.1.[key]"),
    # None, the same
    (None, "metadata.None.[key]"),
    # a short tuple: quoted in the problem, the metadata named
    (("a",), "metadata"),
    # a long one: the same, cut
    ((HUGE,), "metadata"),
], ids=["int", "none", "short tuple", "long tuple"])
def test_the_field_is_the_location_only_when_plain(key: Any, field: str) -> None:
    with pytest.raises(ValidationError) as info:
        parse_message(MESSAGE, metadata={key: 1}, **LIMITS)
    assert info.value.field == field
