"""A LoCoMo sample that gives one `dia_id` to two turns is refused by every checked reader
(`tiermem import`, `tiermem eval`, `tune`, recall_rounds), naming the sample and the id,
as any other malformed turn: a question's evidence naming it would name two turns, and
the readers disagreed on which (the evals scored the first, `tune` the last). Where a
reader goes on (`--skip-bad`, the lenient readers, a conversations-format file that
repeats a `message_id`), an id names the first turn that carries it: one mapping,
`locomo.evidence_index`. Tiny hand-made files."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from locomo_mini import question, sample, write

from tiermem.config import Config
from tiermem.evals.conversations import (
    ConversationData,
    Probe,
    checked_samples,
    open_conversations,
    read_conversations,
)
from tiermem.evals.locomo import evidence_index
from tiermem.evals.recall_rounds import load_checked
from tiermem.tiers.errors import DataFileError

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

LIMITS = {"max_content_bytes": 1 << 20, "max_metadata_bytes": 1 << 14}
TEXTS = ["I adopted a grey cat named Pixel.", "Nice! How old is Pixel?", "She is two.", "Cute."]


def _repeating(where: str) -> dict[str, Any]:
    s = sample("dup", TEXTS, [question("How old is the cat?", "two", ["D1:3"])])
    turns = s["conversation"]["session_1"]
    if where == "same_session":
        turns[3]["dia_id"] = "D1:3"
    else:  # a second session whose first turn repeats session 1's id
        s["conversation"]["session_2"] = [turns.pop()]
        s["conversation"]["session_2"][0]["dia_id"] = "D1:3"
        s["conversation"]["session_2_date_time"] = "2:00 pm on 9 May, 2023"
    return s


def _open(path: Path) -> None:
    with open_conversations(path, **LIMITS):
        pass


# (id, a checked reader of the file)
READERS: list[tuple[str, Callable[[Path], Any]]] = [
    ("eval", lambda p: checked_samples(p, Config())),  # tiermem eval locomo / cost / session
    ("tune", lambda p: read_conversations(p, **LIMITS)),  # tune, the benchmarks
    ("import", _open),  # tiermem import
    ("recall_rounds", load_checked),
]


@pytest.mark.parametrize("reader", [r[1] for r in READERS], ids=[r[0] for r in READERS])
@pytest.mark.parametrize(("where", "place"), [
    ("same_session", "#4 of session_1"),  # two turns of one session
    ("next_session", "#1 of session_2"),  # a later session reuses an id
])
def test_a_repeated_dia_id_refuses_the_file(tmp_path: Path, reader: Callable[[Path], Any], where: str,
                                            place: str) -> None:
    path = write(tmp_path / "dup.json", [_repeating(where)])
    with pytest.raises(DataFileError) as exc:
        reader(path)
    msg = str(exc.value)
    assert "sample 'dup', turn 'D1:3'" in msg and "#3 of session_1" in msg and place in msg


@pytest.mark.parametrize("reader", [r[1] for r in READERS], ids=[r[0] for r in READERS])
def test_turns_without_a_dia_id_are_not_repeats(tmp_path: Path, reader: Callable[[Path], Any]) -> None:
    s = sample("nodia", TEXTS, [question("How old is the cat?", "two", ["D1:3"])])
    for t in s["conversation"]["session_1"][:2]:
        del t["dia_id"]  # named by their place; nothing for evidence to name twice
    reader(write(tmp_path / "nodia.json", [s]))  # read before and after: pinned


def test_skipping_bad_turns_keeps_the_first(tmp_path: Path) -> None:
    data = read_conversations(write(tmp_path / "dup.json", [_repeating("same_session")]), strict=False, **LIMITS)
    conv = data.conversations[0]
    assert [b.line for b in data.bad] == [1] and "D1:3" in data.bad[0].problem
    assert len(conv.messages) == len(TEXTS) - 1  # the repeat skipped
    assert conv.evidence_positions(conv.probes[0]) == ([2], 0)  # the first turn with the id


@pytest.mark.parametrize(("pairs", "want"), [
    ([("D1:1", 0), ("D1:2", 1)], {"D1:1": 0, "D1:2": 1}),  # unique ids
    ([("D1:1", 0), ("D1:1", 5)], {"D1:1": 0}),  # repeated: the first (tune took the last)
    ([("", 0), (None, 1), ("D1:1", 2)], {"D1:1": 2}),  # a turn without an id names nothing
])
def test_evidence_index(pairs: list[tuple[str | None, int]], want: dict[str, int]) -> None:
    assert evidence_index(pairs) == want


def test_tune_resolves_a_repeated_message_id_to_the_first(tmp_path: Path) -> None:
    # the conversations format repeats a message_id unrefused: tune now reads it as the evals do
    conv = ConversationData("c", [{"role": "user", "content": x} for x in "abc"], ["m1", "m2", "m1"])
    assert conv.evidence_positions(Probe("q?", ["m1", 1])) == ([0, 1], 0)
