"""The OpenAPI document says of the erasures' 503 and 507 what their answers say: they
commit in several transactions (`handlers.SEVERAL_TRANSACTION_ROUTES`), so a storage
refusal partway may leave the request partly done, and sending it again is safe
(`INCOMPLETE_REQUEST_TEXT`, answered since 8fa7778). Every other route keeps "nothing
written": one transaction, rolled back whole.

Fails on the code before (review of the HTTP contract, 2026-12-07): the three erasure
routes shared `schemas.ERRORS`, whose 503 and 507 promised "nothing written" while the
answers said "the request may be partly done"."""

from __future__ import annotations

from typing import Any

import pytest
from hash_embedder import HashEmbedder

from tiermem import Config, Memory
from tiermem.service import create_app
from tiermem.service.handlers import SEVERAL_TRANSACTION_ROUTES
from tiermem.tiers.files import INCOMPLETE_REQUEST_TEXT

pytestmark = pytest.mark.usefixtures("clean_env")

NOTHING_WRITTEN = "nothing written"
STORAGE_STATUSES = ("503", "507")


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("openapi") / "data", auth_tokens={"tok-acme-0123456789abcdef": "acme"})
    with Memory(cfg, embedder=HashEmbedder(), hot=False, background_indexing=False) as mem:
        return create_app(cfg, mem, start_scheduler=False).openapi()


def _operations(spec: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(method.upper(), path, op) for path, item in spec["paths"].items() for method, op in item.items()]


def test_the_three_erasure_routes_are_in_the_document(spec: dict[str, Any]) -> None:
    documented = {(method, path) for method, path, _ in _operations(spec)}
    assert documented >= SEVERAL_TRANSACTION_ROUTES


@pytest.mark.parametrize("status", STORAGE_STATUSES)
def test_an_erasure_route_documents_a_partly_done_request(spec: dict[str, Any], status: str) -> None:
    for method, path, op in _operations(spec):
        if (method, path) not in SEVERAL_TRANSACTION_ROUTES:
            continue
        text = op["responses"][status]["description"]
        assert INCOMPLETE_REQUEST_TEXT in text, (method, path, text)  # was "nothing written"
        assert NOTHING_WRITTEN not in text and "'written': false when" not in text, (method, path, text)


@pytest.mark.parametrize("status", STORAGE_STATUSES)
def test_every_other_writing_route_keeps_nothing_written(spec: dict[str, Any], status: str) -> None:
    """Passes before and after: one transaction, rolled back whole."""
    for method, path, op in _operations(spec):
        if (method, path) in SEVERAL_TRANSACTION_ROUTES or status not in op["responses"]:
            continue
        text = op["responses"][status]["description"]
        assert INCOMPLETE_REQUEST_TEXT not in text, (method, path, text)
