"""A process that records a pin or unpin in the log and is SIGKILLed before its hot-tier
script runs (test_hot_pin_killed):

    python tests/hot_pin_killed_child.py DATA_DIR pin|unpin POSITION PRIORITY

It opens a full Memory on DATA_DIR (the embedded Redis there, shared with the test)
under the test's config, with `KilledLink` as its hot link: a test-only subclass of
tiermem's HotLink whose pin and unpin, which Memory.pin and Memory.unpin call once the
log has committed the change, kill the process instead. It never exits by itself.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

from tiermem import Config, Memory
from tiermem.hotlink import HotLink

CONV = "c"
# a small set, so that the filled conversation has evicted the turn the test pins
CONFIG = {"hot_budget_tokens": 300, "head_protect": 1, "tail_protect": 2}


def config(data: Path) -> Config:
    return Config(data_dir=data, **CONFIG)


class KilledLink(HotLink):
    """Dies between the log's write and the hot tier's script."""

    def pin(self, conversation_id: str, position: int, priority: int, **_: Any) -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    def unpin(self, conversation_id: str, position: int, **_: Any) -> None:
        os.kill(os.getpid(), signal.SIGKILL)


def main(data: Path, op: str, position: int, priority: int) -> None:
    cfg = config(data)
    mem = Memory(cfg, background_indexing=False)
    assert mem.hot is not None
    mem.hot.close()
    mem.hot = KilledLink(cfg, mem.cold)
    if op == "pin":
        mem.pin(CONV, position, priority=priority)
    else:
        mem.unpin(CONV, position)
    raise SystemExit(f"{op} returned: the process was not killed")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
