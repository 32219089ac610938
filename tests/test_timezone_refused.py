"""A call's time zone is checked at the edge: anything but an IANA name zoneinfo knows is
refused with a ValidationError naming `timezone`, before anything is read, computed or
written (no plan stored, no epoch advanced, no turn cache entry made).

On the code before `timezone` was no parameter at all (a TypeError)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tiermem import Config, Memory
from tiermem.tiers.embed import Embedder
from tiermem.tiers.errors import ValidationError

REFUSED = [
    "Mars/Olympus_Mons",  # no such zone
    "",  # empty
    "../../etc/passwd",  # a path, not a key
    "/etc/localtime",  # an absolute path
    "A" * 65,  # past MAX_ZONE_NAME_CHARS
    "UTC\x00",  # a NUL
    42,  # not a string
    b"UTC",  # bytes, not a string
]


@pytest.fixture
def mem(tmp_path: Path, embedder: Embedder) -> Memory:
    m = Memory(Config(data_dir=tmp_path / "data", store_plans=True), embedder=embedder, hot=False,
               background_indexing=False)
    m.append("c", {"role": "user", "content": "What did I do yesterday?"})
    return m


@pytest.mark.parametrize("zone", REFUSED)
def test_context_refuses_a_bad_zone_and_writes_nothing(mem: Memory, zone: object) -> None:
    with mem:
        key = mem.cold.key_of("default", "c")
        assert key is not None
        with pytest.raises(ValidationError) as e:
            mem.context("c", "What did I do yesterday?", timezone=zone)  # type: ignore[arg-type]
        assert e.value.field == "timezone"
        assert mem.cold.plans(key) == []  # no plan stored
        assert mem.turns.stats()["conversations"] == 0  # nothing read into the turn cache
        # no epoch advanced: the next good call starts the first one
        assert mem.context("c", "What did I do yesterday?").plan.cache.epoch == 1


@pytest.mark.parametrize("zone", REFUSED)
def test_a_namespaced_view_refuses_a_bad_zone(mem: Memory, zone: object) -> None:
    with mem:
        with pytest.raises(ValidationError) as e:
            mem.namespaced("acme", timezone=zone)  # type: ignore[arg-type]
        assert e.value.field == "timezone"
        with pytest.raises(ValidationError) as e:
            mem.namespaced("acme").namespaced("alice", timezone=zone)  # type: ignore[arg-type]
        assert e.value.field == "timezone"
        view = mem.namespaced("acme")
        with pytest.raises(ValidationError) as e:
            view.context("c", "hi", timezone=zone)  # type: ignore[arg-type]
        assert e.value.field == "timezone"
