"""Crash: SIGKILL the server at random moments under load and restart it, again and again.
Every acknowledged append survives exactly once at its position; an append whose answer
never came back ("maybe") is there at most once; positions stay contiguous; after the last
restart the derived indexes catch up (pending_embeddings reaches 0) and the hot tier is
rebuilt (context plans answer from it, not degraded).

The server processes are forked from a zygote that loaded the embedding model once (see
reliability_helpers.Zygote): each is a real process running the service's app under
uvicorn, killed with a real SIGKILL, and a restart costs about a second instead of the
model load. Bounded: 3 kills; soak (TIERMEM_SOAK=1): 20. Each kill comes only after the
server it kills has acknowledged MIN_ACKED_PER_KILL appends (the floor, explained below)."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from reliability_helpers import (
    SOAK,
    STARTUP_TIMEOUT_S,
    A,
    Zygote,
    ack_counter,
    assert_log_ok,
    check_log,
    conv_ids,
    poll,
    record_figure,
    run_load,
    seed,
    stop_redis,
)


@pytest.fixture(scope="module")
def zygote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Zygote]:
    root = tmp_path_factory.mktemp("rel-crash")
    z = Zygote(root / "data", root / "server.log")
    try:
        yield z
    finally:
        z.close()
        stop_redis(root / "data")


# The floor that gives "nothing acknowledged lost" its meaning. A kill tests it only for
# the appends the killed server acknowledged. The fixed schedule this replaces (a kill
# 0.2-1 s after each 2-4 s restart, the load a fixed 8 s from a guessed 3 s client start)
# saw 5-28 acknowledged appends in all, and its kills outlasted the load, so the last ones
# came with no append in flight. So each kill waits until the server it kills has
# acknowledged MIN_ACKED_PER_KILL appends since it came up, then a random 0-0.3 s more with
# the clients still writing, so that the SIGKILL lands amid appends in flight (committed
# but unanswered ones are the "maybe"s) at a moment no schedule chose. 20: about one per
# conversation written to, on each server, 60 across the 3 kills; at the 10-30 appends/s
# this 2-core machine acknowledges under load that is 1-2 s, about what the fixed schedule
# spent in its random waits, and the clients now start on a signal: on the same loaded
# machine the test took 14-27 s against 16-28 s before (the restarts, 1.7-3.9 s, make most
# of the spread). A loaded machine makes it wait longer for the same floor, never pass on less.
MIN_ACKED_PER_KILL = 20
ACKS_WAIT_S = 60.0  # a server that acknowledges fewer in this long is broken, not slow: fail
KILL_JITTER_S = (0.0, 0.3)  # after the floor: where in the in-flight appends the kill lands
DEAD_S = (0.0, 0.3)  # the server stays dead this long before the restart (clients hit a closed port)
TAIL_S = 0.5  # load after the last restart: the restarted server acknowledges appends too


def _crash_run(zygote: Zygote, tmp: Path, kills: int, tag: str) -> None:
    rng = random.Random(kills)
    srv = zygote.start()
    convs = [f"{c}-{tag}" for c in conv_ids(20)]
    with srv.client() as http:
        seeded = seed(http, A, convs)
    done: list[float] = []
    acked_before_kill: list[int] = []  # per kill: the appends its server acknowledged before it
    acks = ack_counter()

    def killer(start_at: float) -> None:
        for k in range(kills):
            since = acks.value  # the server now up acknowledged none of these
            ok, _ = poll(lambda since=since: acks.value - since >= MIN_ACKED_PER_KILL, timeout=ACKS_WAIT_S,
                         interval=0.01)
            assert ok, f"kill {k + 1}: the server acknowledged {acks.value - since} appends in {ACKS_WAIT_S} s"
            time.sleep(rng.uniform(*KILL_JITTER_S))
            t0 = time.monotonic()
            zygote.kill9()
            acked_before_kill.append(acks.value - since)
            time.sleep(rng.uniform(*DEAD_S))
            zygote.start()
            done.append(time.monotonic() - t0)

    cap = kills * (ACKS_WAIT_S + STARTUP_TIMEOUT_S)  # the load ends TAIL_S after the last restart
    results = run_load(srv.url, convs, cap, 3, tmp, during=killer, read_share=0.2, acks=acks,
                       stop_after_during=TAIL_S)
    assert len(done) == kills
    with srv.client() as http:
        chk = check_log(http, A, convs, results, seeded)
        assert_log_ok(chk)
        # the premise, from what the clients were told (check_log found each of these in the log)
        assert len(acked_before_kill) == kills and min(acked_before_kill) >= MIN_ACKED_PER_KILL, acked_before_kill
        assert chk.acked >= kills * MIN_ACKED_PER_KILL, chk.acked

        # derived indexes catch up after the last restart
        def caught_up() -> bool:
            return bool(http.get("/v1/stats", headers=A).json()["cold"]["pending_embeddings"] == 0)

        ok, waited = poll(caught_up, timeout=120, interval=0.25)
        assert ok, http.get("/v1/stats", headers=A).json()
        # the hot tier answers again, caught up with the log
        for conv in convs:
            r = http.post(f"/v1/conversations/{conv}/context", json={"query": "what did we decide?", "budget": 300},
                          headers=A)
            assert r.status_code == 200, r.text
            plan = r.json()["plan"]
            assert not plan["degraded"] and plan["tiers"]["hot"] in ("ok", "rebuilt"), plan["tiers"]
        stats = http.get("/v1/stats", headers=A).json()
        assert stats["hot"]["healthy"] is True and stats["hot"]["members"] > 0
    refused_5xx = [x for r in results for x in r.refused if x[2] >= 500]
    assert not refused_5xx, refused_5xx[:5]
    cmd = f"pytest tests/test_reliability_crash.py{' (TIERMEM_SOAK=1)' if tag == 'soak' else ''}"
    record_figure(f"crash [{kills} x SIGKILL under load]: acknowledged appends", chk.acked, "", cmd)
    record_figure(f"crash [{kills} x SIGKILL under load]: acknowledged by each server before its kill (min)",
                  min(acked_before_kill), "", cmd)
    record_figure(f"crash [{kills} x SIGKILL under load]: lost / duplicated acknowledged",
                  f"{len(chk.lost)} / {len(chk.duplicated)}", "", cmd)
    record_figure(f"crash [{kills} x SIGKILL under load]: unanswered appends (committed / not)",
                  f"{chk.maybe_committed} / {chk.maybe - chk.maybe_committed}", "", cmd)
    record_figure(f"crash [{kills} x SIGKILL under load]: embeddings caught up after last restart",
                  round(waited, 2), "s", cmd)
    record_figure(f"crash [{kills} x SIGKILL under load]: kill-to-serving (median)",
                  round(sorted(done)[len(done) // 2], 2), "s", cmd)


def test_sigkill_under_load_loses_nothing_acknowledged(zygote: Zygote, tmp_path: Path) -> None:
    _crash_run(zygote, tmp_path, kills=3, tag="b")


@pytest.mark.soak
@pytest.mark.skipif(not SOAK, reason="soak run: TIERMEM_SOAK=1")
def test_soak_twenty_sigkills(zygote: Zygote, tmp_path: Path) -> None:
    zygote.kill9()
    _crash_run(zygote, tmp_path, kills=20, tag="soak")


def test_the_killed_server_was_really_gone(zygote: Zygote) -> None:
    """The kill is real: no answer on the port until a new process is started."""
    zygote.kill9()
    with pytest.raises(httpx.TransportError):
        httpx.get(zygote.server.url + "/healthz", timeout=2)
    srv = zygote.start()
    assert httpx.get(srv.url + "/healthz", timeout=10).status_code == 200
