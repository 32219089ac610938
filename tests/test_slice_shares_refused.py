"""`slice_shares` takes only what the planner reads: a narrow class's (`default`,
`new_subtask`) `retrieved` share. A per-class `pinned` / `summary` / `tail`, and a recall
class's `retrieved`, were accepted, shown by `tiermem config` and changed nothing (every
share 0.0, then 1.0: 18 of 18 contexts byte-identical; README's own examples set them):
each is now refused, from keyword, env and file alike, naming the `layer_shares` key to
set instead. The share that is kept still changes the context.

Fails before: every refusal case was accepted (the config built), and so was a tune grid
over `slice_shares.default.tail`.
"""

from __future__ import annotations

from pathlib import Path

import pydantic
import pytest

from tiermem import Config, Memory
from tiermem.config import ROOM_CLASSES, SHARE_CLASSES
from tiermem.evals.tune import candidates, parse_grid
from tiermem.planner.build import NARROW_RETRIEVED_SHARE, NEEDS_ROOM_CLASSES, RECALL_FIRST_PASS_SHARE
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.errors import ValidationError

pytestmark = pytest.mark.usefixtures("clean_env")

# (query class, share key, what the error must name as the replacement)
REFUSED = [
    ("targeted_recall", "tail", "layer_shares.tail"),  # README's old example
    ("default", "tail", "layer_shares.tail"),  # the module docstring's old env example
    ("default", "pinned", "layer_shares.pinned"),
    ("new_subtask", "summary", "layer_shares.summary"),
    ("temporal", "pinned", "layer_shares.pinned"),
    ("summarize", "summary", "layer_shares.summary"),
    # a recall class's retrieved turns take all the room the stable layers leave
    ("targeted_recall", "retrieved", "lower layer_shares.pinned, layer_shares.summary or layer_shares.tail"),
    ("recent_recall", "retrieved", "lower layer_shares.pinned"),
    ("temporal", "retrieved", "lower layer_shares.pinned"),
    ("summarize", "retrieved", "lower layer_shares.pinned"),
]
# the share given: no class's old default (0.2 was new_subtask's summary, and an old
# default is dropped, not refused: tests/test_slice_shares_old_export.py)
VALUE = 0.33
# how the share is given
SOURCES = [
    "kwargs",  # Config(slice_shares={cls: {key: VALUE}})
    "env",  # TIERMEM_SLICE_SHARES__<CLS>__<KEY>=VALUE
    "file",  # [slice_shares.<cls>] key = VALUE
    "sectioned-file",  # [planner.slice_shares.<cls>] key = VALUE
]


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize(("qclass", "key", "replacement"), REFUSED)
def test_an_unread_share_is_refused_naming_its_replacement(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           source: str, qclass: str, key: str,
                                                           replacement: str) -> None:
    with pytest.raises(pydantic.ValidationError) as info:
        if source == "kwargs":
            Config(data_dir=tmp_path, slice_shares={qclass: {key: VALUE}})
        elif source == "env":
            monkeypatch.setenv(f"TIERMEM_SLICE_SHARES__{qclass.upper()}__{key.upper()}", str(VALUE))
            Config(data_dir=tmp_path)
        else:
            f = tmp_path / "c.toml"
            section = "planner.slice_shares" if source == "sectioned-file" else "slice_shares"
            f.write_text(f"[{section}.{qclass}]\n{key} = {VALUE}\n")
            Config.load(f, data_dir=tmp_path)
    text = str(info.value)
    assert f"slice_shares.{qclass}.{key}" in text and replacement in text, text


def test_a_tune_grid_over_an_unread_share_fails_before_it_runs() -> None:
    # README's tune table was made with this grid: now refused before any candidate runs
    with pytest.raises(pydantic.ValidationError, match=r"set layer_shares\.tail instead"):
        candidates(None, parse_grid(["slice_shares.targeted_recall.tail=0.1,0.3"]))
    # its replacement, and the share that is read, run
    cands = candidates(None, parse_grid(["layer_shares.tail=0.05,0.2", "slice_shares.default.retrieved=0.02,0.05"]))
    assert [(c.config.layer_shares.tail, c.config.slice_shares["default"].retrieved) for c in cands] == [
        (0.05, 0.02), (0.05, 0.05), (0.2, 0.02), (0.2, 0.05)]


def test_unknown_class_still_refused() -> None:
    with pytest.raises(pydantic.ValidationError, match=r"unknown query classes \['recal'\]"):
        Config(slice_shares={"recal": {"retrieved": 0.1}})
    with pytest.raises(ValidationError, match="is given twice"):  # a grid key given twice: the grid's own check
        parse_grid(["layer_shares.tail=0.1", "layer_shares.tail=0.2"])


def test_the_classes_split_as_the_planner_reads_them() -> None:
    # the classes config refuses a retrieved share for are the ones that take the room left
    assert set(ROOM_CLASSES) == NEEDS_ROOM_CLASSES == set(RECALL_FIRST_PASS_SHARE)
    # every class the classifier gives (planner.classify), in exactly one of the two
    assert sorted([*SHARE_CLASSES, *ROOM_CLASSES]) == sorted(
        ["recent_recall", "targeted_recall", "temporal", "summarize", "new_subtask", "default"])
    assert set(Config().slice_shares) == set(SHARE_CLASSES)


FACTS = [
    "Alice owns the billing microservice and its Postgres replica.",
    "The billing microservice Postgres replica lags behind during the nightly batch.",
    "Alice said the billing microservice replica needs a bigger disk.",
    "We moved the billing microservice Postgres replica to a new host last month.",
]
# a `default` turn (a request, not a recall) that clearly relates to the FACTS turns: a
# narrow retrieval brings them back, up to the class's cap
QUERY = "Can you help me resize the billing microservice Postgres replica disk?"
BUDGET = 2000  # tokens: the narrow cap (0.1 of it) holds every clearly related turn the context leaves to it


def _context(tmp_path: Path, embedder: FastEmbedder, share: float | None) -> tuple[int, int, int, str]:
    """(the retrieved cap, retrieved tokens, retrieved turns, query class) of QUERY's
    context with `slice_shares.default.retrieved` = `share` (None: the default)."""
    kw = {} if share is None else {"slice_shares": {"default": {"retrieved": share}}}
    with Memory(Config(data_dir=tmp_path / f"d{share}", **kw), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        for i in range(160):
            text = (FACTS[(i // 20) % len(FACTS)] if i % 20 == 4 and i < 100
                    else f"chatting about lunch option {i} and the weather {i % 9}, " * (1 + i % 3))
            mem.append("c1", {"role": "user" if i % 2 == 0 else "assistant", "content": text})
        mem.catch_up("c1")
        plan = mem.context("c1", QUERY, BUDGET, record=False).plan
    items = [it for it in plan.items if it.slice == "retrieved"]
    return plan.shares["retrieved"], sum(it.tokens for it in items), len(items), plan.query_class


def test_the_kept_share_changes_a_narrow_context(tmp_path: Path, shared_vectors: FastEmbedder) -> None:
    none = _context(tmp_path, shared_vectors, 0.0)
    small = _context(tmp_path, shared_vectors, 0.02)
    default = _context(tmp_path, shared_vectors, None)
    assert none[3] == small[3] == default[3] == "default"
    # the default share (0.4 of the room) is over the narrow cap: the cap is 0.1 of the budget
    assert default[0] == int(BUDGET * NARROW_RETRIEVED_SHARE)
    # a share below it lowers the cap, and the context keeps to it
    assert none[0] == 0 and 0 < small[0] < default[0]
    assert none[1:3] == (0, 0)
    assert 0 < small[1] <= small[0] and small[2] < default[2]
    assert default[1] <= default[0]  # measured: caps 0 / 39 / 200 tokens, 0 / 1 / 2 turns
