"""Stress: 3 real processes append to one conversation while a 4th pins and unpins at
random, for STRESS_S seconds; then no turn the log pins is missing from the hot set
(neither a member nor a recorded demoted pin), and the set's pin flags are the log's
(tiers.hot, pin stamps). Real redis-server (the embedded one, shared), real SQLite.

On the code before, rebuilds (appends racing each other raise HotStale, and each is a
rebuild) overwrote pins made in their window: 13 of 258 log pins were in neither the
members nor `demoted` in a run of /tmp/rcD/race_procs2.py, and no read repaired them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from hot_pin_race_child import CONV, config

from tiermem import Memory
from tiermem.hotlink import pin_state
from tiermem.tiers.redis_server import EmbeddedRedis

CHILD = Path(__file__).with_name("hot_pin_race_child.py")
APPENDERS = 3
STRESS_S = 10.0
CHILD_EXIT_S = 60.0  # for a child to finish its call, print and close once told to stop
SEED_TURNS = 3000  # a long log: each rebuild reads it, a window pins land in


def test_no_log_pin_goes_missing_from_the_hot_set(tmp_path: Path) -> None:
    data = tmp_path / "data"
    stop = tmp_path / "stop"
    mem = Memory(config(data), background_indexing=False)
    try:
        mem.append_many(CONV, [{"role": "user", "content": f"seed {j} filler words here"} for j in range(SEED_TURNS)])
        roles = [("append", i) for i in range(APPENDERS)] + [("pin", APPENDERS)]
        procs = [subprocess.Popen([sys.executable, str(CHILD), str(data), role, str(seed), str(stop)],
                                  stdout=subprocess.PIPE, text=True) for role, seed in roles]
        try:
            time.sleep(STRESS_S)
        finally:
            stop.touch()
            outs = [p.communicate(timeout=CHILD_EXIT_S)[0] for p in procs]
        assert [p.returncode for p in procs] == [0] * len(procs), outs
        reports = [json.loads(out.strip().splitlines()[-1]) for out in outs]
        assert all(r["ops"] > 0 for r in reports), reports  # every process took part
        assert mem.hot is not None
        key = mem.cold.key_of("default", CONV)
        assert key is not None
        rows = {r.position: pin_state(r) for r in mem.cold.turns(key)}
        log_pins = {p for p, (pinned, _) in rows.items() if pinned}
        assert log_pins  # the premise: the pinner pinned
        read = mem.hot.read(key)
        hs = read.hot
        assert hs is not None and not read.degraded
        members = {t.position for t in hs.turns}
        # every demoted pin (a read lists a bounded few: tiers.hot READ_DEMOTED_LISTED)
        missing = sorted(log_pins - members - set(mem.hot.tier.demoted_pins(key)))
        assert missing == [], f"{len(missing)} of {len(log_pins)} log pins neither hot nor demoted: {missing}"
        flags = [(t.position, t.pinned) for t in hs.turns if t.pinned != rows[t.position][0]]
        assert flags == [], f"pin flags that are not the log's: {flags}"
    finally:
        mem.close()
        EmbeddedRedis(data).stop()
