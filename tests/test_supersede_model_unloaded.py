"""A correction appended by a process whose model is not loaded is decided by the rules at
its append (tiermem.memory `Memory.append_outcome`; consolidation.supersede, rules first).

Supersession searches by meaning, so a live append's was decided only once its turns were
embedded, and only a process that had loaded the model embeds (appending never loads it:
its indexer skips while the model is not in memory). A process that only appends and
refreshes warm views (a writer, `tiermem append` beside a scheduler, a service worker
before its first context) decided nothing: the corrected value stayed current in the
log, and the sweep's refreshed views held it as current, until some process embedded the
turn. Now such an append's correction candidates are decided by the rules where no
user turn lies before the correction's window (the meaning search could find none the
rules miss), no kind is told by meaning and none is left for the meaning search
(Superseder.record's `final`); the rest wait for the embedding's decision as before, so
the end result is the eager process's (tests/test_supersede_unloaded_final.py: a far
target is never taken for a window turn; tests/test_faststart.py, test_ingest_index.py).
The model is still never loaded by an append.

Fails on the code before: the two-process test (turn 0 not superseded in the writer's
log, its rolling view held the aisle seat as current) and the in-process table's
decided cases; the model-not-loaded and meaning-only rows pass on both (they pin what must
not change).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from append_only_child import CONV, CORRECTION, FACT, FILLER

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import build_embedder, embedder_loaded

CHILD = Path(__file__).with_name("append_only_child.py")
CHILD_TIMEOUT_S = 120.0  # a fresh interpreter and its imports, on a loaded CI machine
# the rules' reads (the window, the pins) and their write: milliseconds; bounded for a
# loaded machine, far below a model load (~0.4 s) and the inline embedding of the turns
CORRECTION_APPEND_MAX_S = 2.0


def _writer(data_dir: Path) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(CHILD.parent), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(CHILD), str(data_dir)], capture_output=True, text=True, env=env,
                          timeout=CHILD_TIMEOUT_S, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    out: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def test_a_writer_that_only_appends_decides_its_correction(tmp_path: Path) -> None:
    data = tmp_path / "data"
    said = _writer(data)  # the first process: appends, then a sweep refreshes its views
    assert not said["loaded"], said  # appending still loads no model
    assert said["correction_append_s"] < CORRECTION_APPEND_MAX_S, said
    # the second process only reads what the first left: it embeds and decides nothing
    with Memory(Config(data_dir=data), hot=False, background_indexing=False) as reader:
        correction = 2 * (1 + len(FILLER))
        assert reader.cold.turns(CONV)[0].superseded_by == correction  # before: None
        rolling = reader.warm.latest(CONV, "rolling")
        assert rolling is not None
        assert FACT not in rolling.current_text(), rolling.sentences  # before: the aisle seat, current
        assert CORRECTION in rolling.current_text(), rolling.sentences
        assert not embedder_loaded(reader.embedder)


# (earlier user turns, the later one, {superseded user turn: its superseder} right after the
# append, before any embedding)
@pytest.mark.parametrize(("users", "want"), [
    # a slot the rules match ("seat preference")
    ([FACT, *FILLER, CORRECTION], {0: 4}),
    # a value replaced with its cue ("not 10am")
    (["The pickup is at 10am.", "Actually the pickup is at 11am, not 10am."], {0: 1}),
    # a request taken back by its verb and object (the call-off rules)
    (["Book a table at Nong's for Friday at 7pm.", "Cancel the table at Nong's."], {0: 1}),
    # no cue: nothing to decide, and nothing decided
    ([FACT, "I love the window view on trains."], {}),
])
def test_the_rules_decide_at_the_append(tmp_path: Path, users: list[str], want: dict[int, int]) -> None:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=build_embedder(), hot=False,
                background_indexing=False) as mem:
        for u in users:
            mem.append_many(CONV, [{"role": "user", "content": u}, {"role": "assistant", "content": "Noted."}])
        assert not embedder_loaded(mem.embedder)
        rows = mem.cold.turns(CONV)
        assert {r.position // 2: r.superseded_by // 2 for r in rows if r.superseded_by is not None} == want
        assert mem.cold.pending_embeddings(CONV) == len(rows)  # nothing embedded: the rules alone
