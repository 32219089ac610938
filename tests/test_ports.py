"""The test servers' ports (tests/ports.py): disjoint per worker, never one already bound."""

from __future__ import annotations

import itertools
import socket

import ports
import pytest


@pytest.mark.parametrize("worker", [
    "",  # not under xdist: worker 0's block
    "gw0",
    "gw1",
    "gw7",
])
def test_a_worker_draws_only_from_its_own_block_below_the_ephemeral_range(monkeypatch: pytest.MonkeyPatch,
                                                                          worker: str) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
    base = ports.FIRST_PORT + ports.worker_index() * ports.PORTS_PER_WORKER
    drawn = {ports.free_port() for _ in range(50)}
    assert all(base <= p < base + ports.PORTS_PER_WORKER for p in drawn), sorted(drawn)
    assert max(drawn) < 32_768  # Linux's ephemeral range starts there
    assert len(drawn) == 50  # round-robin: no port handed out twice in a row


def test_two_workers_never_share_a_port(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[int, set[int]] = {}
    for i in range(4):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{i}")
        seen[i] = {ports.free_port() for _ in range(ports.PORTS_PER_WORKER)}
    for i in seen:
        for j in seen:
            assert i == j or not seen[i] & seen[j]


def test_a_port_something_listens_on_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw3")
    monkeypatch.setattr(ports, "_next", itertools.count())  # the draw starts at the block's base
    base = ports.FIRST_PORT + 3 * ports.PORTS_PER_WORKER
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", base + 1))
        busy.listen()
        drawn = [ports.free_port() for _ in range(3)]
    assert drawn == [base, base + 2, base + 3]
