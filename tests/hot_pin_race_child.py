"""A process of the hot-tier pin race stress (test_hot_pin_race_processes):

    python tests/hot_pin_race_child.py DATA_DIR ROLE SEED STOP_FILE

It opens a full Memory on DATA_DIR (the embedded Redis there, shared with the test and
the other children) under the test's config and works on conversation "c" until
STOP_FILE exists: ROLE `append` appends turns of random length, ROLE `pin` pins (or, one
time in PIN_UNPIN_SHARE, unpins) a random position of the log with a random priority.
It prints one JSON line at the end: {"ops": n, "last_error": the hot link's}.
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path

from tiermem import Config, Memory

CONV = "c"
# the stress's set: small, so that appends evict and pins change members
CONFIG = {"hot_budget_tokens": 400, "head_protect": 1, "tail_protect": 3}
UNPIN_SHARE = 0.4  # of the pinner's operations that are unpins
MAX_FILLER_REPEATS = 4  # an appended turn holds 1 to this many fillers
MAX_PRIORITY = 100
IDLE_WAIT_S = 0.01  # while the log is too short to pin in


def config(data_dir: Path) -> Config:
    return Config(data_dir=data_dir, **CONFIG)


def main() -> None:
    data_dir, role, seed, stop = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
    rnd = random.Random(seed)
    mem = Memory(config(data_dir), background_indexing=False)
    ops = 0
    try:
        key = mem.cold.key_of("default", CONV)
        assert key is not None  # the test appended first
        while not stop.exists():
            if role == "append":
                mem.append(CONV, {"role": "user" if ops % 2 else "assistant",
                                  "content": f"p{seed} k{ops} " + "filler words here " * rnd.randint(1, MAX_FILLER_REPEATS)})
            else:
                last = mem.cold.last_position(key)
                if last < 1:
                    time.sleep(IDLE_WAIT_S)
                    continue
                position = rnd.randint(0, last)
                if rnd.random() < UNPIN_SHARE:
                    mem.unpin(CONV, position)
                else:
                    mem.pin(CONV, position, priority=rnd.randint(1, MAX_PRIORITY))
            ops += 1
        assert mem.hot is not None
        print(json.dumps({"ops": ops, "last_error": mem.hot.last_error}), flush=True)
    finally:
        mem.close()


if __name__ == "__main__":
    main()
