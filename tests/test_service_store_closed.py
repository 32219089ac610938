"""A request that meets the cold store closed under the service (a Memory closing while
the app still answers: a shutdown in progress) is the store's 503 with Retry-After, as
README says of a store that is down, not a 500 "internal error". Before: a bare
`StoreUnavailable("the store is closed")` (SQLite's and PostgreSQL's closed store) was
not one `storage_problem` knew, so the generic TiermemError handler answered 500.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tiermem import Config, Memory
from tiermem.service.app import create_app
from tiermem.service.handlers import STORAGE_RETRY_AFTER_S
from tiermem.tiers.errors import StoreUnavailable
from tiermem.tiers.files import storage_problem

CONV = "c1"


# (the error as the stores raise it) -- each a 503 without "written": false (the class
# is also raised after a transaction began, so it cannot promise nothing was written)
CASES = [
    StoreUnavailable("/data/tiermem.db", "the store is closed"),  # tiers/cold.py, the connection gone
    StoreUnavailable("postgresql://db/x", "the store is closed"),  # tiers/postgres.py, the pool gone
    StoreUnavailable("k", "another process holds the unpublished fork's lock"),  # a fork refused
]


@pytest.mark.parametrize("exc", CASES)
def test_a_bare_store_unavailable_is_a_503(exc: StoreUnavailable) -> None:
    problem = storage_problem(exc)
    assert problem is not None, "a store that is unavailable is not a bug"
    assert problem.status == 503
    assert not problem.refused_unwritten and not problem.busy


def test_an_append_to_a_closed_store_is_answered_503(tmp_path: Path) -> None:
    config = Config(data_dir=str(tmp_path / "data"))
    memory = Memory(config)
    try:
        memory.append(CONV, {"role": "user", "content": "hello"})
        app = create_app(config, memory, auth=False, start_scheduler=False)
        with TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False) as client:
            memory.cold.close()  # what a shutdown does under a request still being answered
            r = client.post(f"/v1/conversations/{CONV}/messages", json={"role": "user", "content": "again"})
        assert r.status_code == 503, r.text
        assert r.headers["Retry-After"] == str(STORAGE_RETRY_AFTER_S)
        assert "storage unavailable" in r.json()["detail"]
        assert "written" not in r.json()
    finally:
        memory.close()
