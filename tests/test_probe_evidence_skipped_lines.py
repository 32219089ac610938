"""A probe's index evidence after a skipped line names the message the file's author
meant. `read_conversations(strict=False)` skips bad lines, and an index evidence is "a
0-based index among the conversation's messages in file order", but
`ConversationData.evidence_positions` read it as an index among the messages kept: after a
skipped line every index named the next message (the one after the evidence), and one
naming the skipped message named the message after it instead of none. Now an index is
renumbered as a retraction's position is (`_Numbering`), and one naming a skipped message,
or one that cannot be told (after a line of no known conversation), counts as missing.

The LoCoMo side of the same suspicion is not real: its evidence is a `dia_id`, mapped by
id (`evidence_index`) to the positions append returned or history read, and an eval that
reuses a stored conversation holding an unreadable row refuses it (the last test). Real
files under tmp_path, and real SQLite for that test (the row rewritten behind tiermem's
back)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cold_helpers import rewrite_stored
from convo_fixtures import tiny_locomo

from tiermem.config import DEFAULT_MAX_CONTENT_BYTES, DEFAULT_MAX_METADATA_BYTES, Config
from tiermem.evals.conversations import read_conversations
from tiermem.evals.locomo import LocomoError, ingest_sample, load_samples
from tiermem.memory import Memory
from tiermem.tiers.embed_onnx import FastEmbedder

CONV = "c"


def msg(text: str, **extra: Any) -> str:
    return json.dumps({"conversation_id": CONV, "role": "user", "content": text, **extra})


BAD_ROLE = json.dumps({"conversation_id": CONV, "role": "wizard", "content": "skipped"})  # a bad line of c
# a bad conversation object of c holding two messages (its count is known)
BAD_OBJECT = json.dumps({"conversation_id": CONV, "messages": [{"role": "user", "content": "s1"},
                                                                {"role": "wizard", "content": "s2"}]})
NOT_JSON = "{not json"  # a bad line whose conversation cannot be told


def probe(*evidence: str | int) -> str:
    return json.dumps({"conversation_id": CONV, "probe": {"question": "Which one?", "evidence": list(evidence)}})


# (id, the file's lines, the evidence texts found, how many entries name no message)
CASES: list[tuple[str, list[str], list[str], int]] = [
    # the index after a skipped line: the file's third message (index 2) is "m2"
    ("after_a_skipped_line", [msg("m0"), BAD_ROLE, msg("m2"), msg("m3"), probe(2)], ["m2"], 0),
    # the index of the skipped message itself names none (it was not read)
    ("the_skipped_message", [msg("m0"), BAD_ROLE, msg("m2"), probe(1)], [], 1),
    # a skipped object's two messages counted: the file's index 3 is "m3"
    ("after_a_skipped_object", [msg("m0"), BAD_OBJECT, msg("m3"), msg("m4"), probe(3, 4)], ["m3", "m4"], 0),
    # before the skipped line the indexes are as they were
    ("before_the_skipped_line", [msg("m0"), msg("m1"), BAD_ROLE, msg("m3"), probe(0, 1)], ["m0", "m1"], 0),
    # past the end of the file's messages: none, as before
    ("past_the_end", [msg("m0"), BAD_ROLE, msg("m2"), probe(3)], [], 1),
    # after a line of no known conversation the file's numbering is not known: none; an
    # id still names its message
    ("after_an_unknown_line", [msg("m0"), NOT_JSON, msg("m2", message_id="two"), probe(2, "two")], ["m2"], 1),
    # a probe before the messages it names: the skipped line after it counts too
    ("probe_first", [probe(3), msg("m0"), msg("m1"), BAD_ROLE, msg("m3")], ["m3"], 0),
]


@pytest.mark.parametrize(("lines", "found", "missing"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_index_evidence_names_the_file_message(tmp_path: Path, lines: list[str], found: list[str],
                                               missing: int) -> None:
    f = tmp_path / "probes.jsonl"
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    data = read_conversations(f, max_content_bytes=DEFAULT_MAX_CONTENT_BYTES,
                              max_metadata_bytes=DEFAULT_MAX_METADATA_BYTES, strict=False)
    assert data.bad  # the file had a skipped line
    (conv,) = data.conversations
    (p,) = conv.probes
    idx, n_missing = conv.evidence_positions(p)
    assert ([conv.messages[i]["content"] for i in idx], n_missing) == (found, missing)


def test_a_file_without_bad_lines_reads_indexes_as_given(tmp_path: Path) -> None:
    f = tmp_path / "probes.jsonl"
    f.write_text("\n".join([msg("m0"), msg("m1"), msg("m2"), probe(2, 0, 5)]) + "\n", encoding="utf-8")
    for strict in (True, False):
        (conv,) = read_conversations(f, max_content_bytes=DEFAULT_MAX_CONTENT_BYTES,
                                     max_metadata_bytes=DEFAULT_MAX_METADATA_BYTES, strict=strict).conversations
        assert conv.evidence_positions(conv.probes[0]) == ([2, 0], 1)


def test_a_reused_locomo_conversation_with_an_unreadable_row_is_refused(tmp_path: Path,
                                                                       embedder: FastEmbedder) -> None:
    f = tmp_path / "locomo.json"
    f.write_text(json.dumps(tiny_locomo()), encoding="utf-8")
    (sample,) = load_samples(f)
    with Memory(Config(data_dir=tmp_path / "d"), embedder=embedder, hot=False, background_indexing=False) as mem:
        ing = ingest_sample(mem, sample)
        assert ing.dia_to_pos == {"D1:1": 0, "D1:2": 1, "D2:1": 2, "D2:2": 3}  # the positions append returned
        key = mem.cold.key_of(ing.namespace, ing.conversation_id)
        assert key is not None
    unreadable = json.dumps({"role": "assistant", "content": "x", "tool_calls": "not-a-list"})
    rewrite_stored(Config(data_dir=tmp_path / "d").db_path, key, [(1, "role", "assistant"), (1, "body", unreadable)])
    with Memory(Config(data_dir=tmp_path / "d"), embedder=embedder, hot=False, background_indexing=False) as mem, \
            pytest.raises(LocomoError, match="3 readable turns, sample 't-1' has 4; use a fresh --data-dir"):
        ingest_sample(mem, sample)  # not reused with every later dia_id one position off
