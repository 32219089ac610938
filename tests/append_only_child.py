"""A child process of tests/test_supersede_model_unloaded.py: a writer that only appends
and refreshes warm views, as `tiermem append` beside a scheduler or a service worker that
has not served a context yet: it never asks for a vector, so its embedding model is never
loaded (appending never loads it).

    python tests/append_only_child.py DATA_DIR

Appends FACT, filler and CORRECTION (each answered), refreshes the conversation's views,
and prints one JSON line: whether the model was loaded at the end, and the latency of the
correction's append in seconds."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import embedder_loaded

CONV = "c"
FACT = "My seat preference is an aisle seat, always."
CORRECTION = "Actually, switch my seat preference to a window seat."
# a view more than this many turns behind is over its budget: the sweep refreshes every view
WARM_MAX_TURNS_BEHIND = 1
FILLER = ["I had a long day at work.", "The weather was lovely this morning.", "I made pasta for dinner."]


def main(data_dir: Path) -> None:
    # the indexer on, as a long-lived writer runs: it embeds nothing until the model is loaded
    with Memory(Config(data_dir=data_dir, warm_max_turns_behind=WARM_MAX_TURNS_BEHIND), hot=False) as mem:
        for text in [FACT, *FILLER]:
            mem.append_many(CONV, [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}])
        t0 = time.perf_counter()
        mem.append(CONV, {"role": "user", "content": CORRECTION})
        took = time.perf_counter() - t0
        mem.append(CONV, {"role": "assistant", "content": "Noted."})
        mem.consolidate()  # a sweep, as the scheduler's runs: views over their budgets
        print(json.dumps({"loaded": embedder_loaded(mem.embedder), "correction_append_s": took}))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
