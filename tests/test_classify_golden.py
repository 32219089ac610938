"""The classifier's and the append-time supersession's decisions on real conversations
are pinned: a change made for speed must leave every label and every superseded pair as
it was.

The digests below were recorded on the code before the speed work (main 4f6b8c3) over
every turn of LoCoMo's dev conversations (../shared/data/locomo-dev.json): each turn's
(intent, load-bearing, priority, reason) as the write path classifies it, plus each
turn's role-"user" label (supersession classifies a turn's assertive part as a user
turn), and, for the conversations appended through `Memory.append_many` with no
model loaded (the rules the write path runs), every (old, superseding) position pair
and every turn's stored label (all four conversations). A rule changed ON PURPOSE changes them: re-record with
`python tests/test_classify_golden.py` and say so in the commit.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tiermem.config import DEFAULT_MAX_CONTENT_BYTES, DEFAULT_MAX_METADATA_BYTES, Config
from tiermem.consolidation.classify import TurnClassifier, clear_memo, correction_cue, normalize
from tiermem.evals.conversations import Dataset, read_conversations
from tiermem.memory import Memory
from tiermem.tiers.formats import message_text

DEV = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "locomo-dev.json"
pytestmark = pytest.mark.skipif(not DEV.is_file(), reason="LoCoMo dev data is not here")

# recorded on 4f6b8c3 (see the module docstring); re-recorded on purpose (2026-12-02, the
# reminder, narration, cheering and wish shapes of consolidation/classify.py): 13 of the
# 2,080 turns are no longer load-bearing (tests/test_classify_reminders.py)
LABELS_DIGEST = "dafc23a8ef158b291b1702036084203064e0c3741086250f687d4370499eb7ef"
CUES_DIGEST = "f549e8622c37dad7fc98422e0aabccac704b0ade744255791c339c5b7664fe25"
# re-recorded on purpose (2026-12-02, the narration idioms of consolidation/supersede.py):
# the rules alone now supersede no whole turn of these conversations, where before they
# superseded some, every one wrong by reading (README, "Narration that held a cue word");
# the digest still pins every turn's stored label and that none is superseded; re-recorded
# with the labels above (stored labels changed, the pairs did not)
SUPERSESSION_DIGEST = "7591652b4587597b7a32b2274a9007c7985acd0d591191f9d5feda5c1fa722a6"
SUPERSESSION_PAIRS = 0


def _data() -> Dataset:
    return read_conversations(DEV, max_content_bytes=DEFAULT_MAX_CONTENT_BYTES,
                              max_metadata_bytes=DEFAULT_MAX_METADATA_BYTES, strict=True, conversation_id=None)


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, ensure_ascii=False).encode()).hexdigest()


def labels_digest(data: Dataset) -> tuple[int, str]:
    c = TurnClassifier()
    rows = []
    for conv in data.conversations:
        for m in conv.messages:
            text, role = message_text(m), m["role"]
            for r in dict.fromkeys((role, "user")):  # as written, and as supersession asks
                lab = c.classify(text, r)
                rows.append([lab.intent, lab.load_bearing, lab.priority, lab.reason])
    return len(rows), _digest(rows)


def cues_digest(data: Dataset) -> tuple[int, str]:
    rows = []
    for conv in data.conversations:
        for m in conv.messages:
            norm = normalize(message_text(m))
            rows.append([correction_cue(norm, "user"), correction_cue(norm, "assistant")])
    return len(rows), _digest(rows)


def supersession_digest(data: Dataset, tmp: Path) -> tuple[int, str]:
    rows = []
    with Memory(Config(data_dir=tmp / "data"), hot=False, background_indexing=False) as mem:
        for conv in data.conversations:
            for i in range(0, len(conv.messages), 100):  # several calls: decisions across batches too
                mem.append_many(conv.conversation_id, conv.messages[i:i + 100])
            key = mem.cold.key_of("default", conv.conversation_id) or ""
            rows += [[conv.conversation_id, r.position, r.superseded_by, r.intent, r.load_bearing, r.priority]
                     for r in mem.cold.turns(key)]
    return sum(1 for r in rows if r[2] is not None), _digest(rows)


# computed, then answered from the classifier's memo of recent texts: both are the record
def test_every_label_is_the_recorded_one() -> None:
    clear_memo()
    data = _data()
    for _ in range(2):
        n, got = labels_digest(data)
        assert n > 2000 and got == LABELS_DIGEST


def test_every_correction_cue_is_the_recorded_one() -> None:
    clear_memo()
    data = _data()
    for _ in range(2):
        n, got = cues_digest(data)
        assert n > 2000 and got == CUES_DIGEST


def test_append_time_supersession_is_the_recorded_one(tmp_path: Path) -> None:
    clear_memo()
    n, got = supersession_digest(_data(), tmp_path)
    assert n == SUPERSESSION_PAIRS and got == SUPERSESSION_DIGEST


def test_the_memo_answers_as_computed_and_an_erasure_empties_it(tmp_path: Path) -> None:
    from tiermem.consolidation import classify

    text = "Actually, make it Wednesday at 3pm instead."
    with Memory(Config(data_dir=tmp_path / "data"), hot=False, background_indexing=False) as mem:
        mem.append("c", {"role": "user", "content": text})
        assert (text, "user") in classify._label_memo
        assert TurnClassifier().classify(text, "user") == classify.TurnClassifier()._classify(text, "user", None)
        mem.delete_conversation("c")
        # no copy of the erased turn's text is left in the classifier's memos
        assert not any(text in k[0] or normalize(text) in k[0] for k in classify._label_memo)
        assert not any(normalize(text) in k[0] for k in classify._cue_memo)


if __name__ == "__main__":  # re-record (see the module docstring)
    import tempfile

    d = _data()
    print("LABELS", *labels_digest(d))
    print("CUES", *cues_digest(d))
    with tempfile.TemporaryDirectory() as t:
        print("SUPERSESSION", *supersession_digest(d, Path(t)))
    sys.exit(0)
