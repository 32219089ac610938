"""A child process of tests/test_rebuild_append_race.py: another process appending to a
conversation while the test's process rebuilds the store.

    python tests/rebuild_race_worker.py DATA_DIR cue
    python tests/rebuild_race_worker.py DATA_DIR loop STOP_FILE

It opens a Memory on DATA_DIR (the cold tier alone, the hash embedder) and prints
"ready". `cue`: for each line on stdin (a word), it appends one message naming that word
(CUE_TEXT) to CONV and prints its position; it ends at the end of stdin. `loop`: it
appends LOOP_TEXT messages one after another until STOP_FILE exists, then prints how
many it appended.
"""

from __future__ import annotations

import sys
from pathlib import Path

from hash_embedder import HashEmbedder

from tiermem import Config, Memory
from tiermem.tiers.models import Message

CONV = "ticket"
CUE_TEXT = "a note about the {}"
LOOP_TEXT = "looped append {} about the boiler"
# the appends wait for the rebuild's batches far longer than one lasts: the test is about
# what the rebuild leaves of them, not whether they time out
APPEND_LOCK_WAIT_MS = 60_000


def main(data_dir: Path, mode: str, stop: Path | None) -> None:
    config = Config(data_dir=data_dir, busy_timeout_ms=APPEND_LOCK_WAIT_MS)
    with Memory(config, embedder=HashEmbedder(), hot=False, background_indexing=False) as mem:
        print("ready", flush=True)
        if mode == "cue":
            for line in sys.stdin:
                print(mem.append(CONV, Message(role="user", content=CUE_TEXT.format(line.strip()))), flush=True)
            return
        assert stop is not None
        n = 0
        while not stop.exists():
            mem.append(CONV, Message(role="user", content=LOOP_TEXT.format(n)))
            n += 1
        print(n, flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]) if len(sys.argv) > 3 else None)
