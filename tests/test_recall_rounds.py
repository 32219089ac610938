"""evals.recall_rounds: variants parse to the planner's knobs, are applied only for their
block, and leave-one-out chooses on the other samples, never on the held-out one."""

from __future__ import annotations

import pytest

from tiermem.evals.recall_rounds import (
    Variant,
    applied,
    leave_one_out,
    loo_one_setting,
    parse_budgets,
    parse_variant,
    slice_tokens,
)
from tiermem.planner import (
    density,
    episodes,
    excerpt,
    feedback,
    multihop,
    prior,
    query_text,
    rank,
    render,
    speakers,
)
from tiermem.planner.plan import Plan, PlanItem
from tiermem.tiers.errors import ValidationError


@pytest.mark.parametrize(("spec", "name", "values"), [
    ("base:", "base", {}),  # nothing set: every weight off
    ("both:hop=1.0,keys=0.5", "both", {"hop": 1.0, "keys": 0.5}),  # two knobs
    ("g: hop=0.5 , hoproom=0", "g", {"hop": 0.5, "hoproom": 0.0}),  # spaces tolerated
])
def test_parse_variant(spec: str, name: str, values: dict[str, float]) -> None:
    v = parse_variant(spec)
    assert (v.name, v.values) == (name, values)


@pytest.mark.parametrize("spec", [
    "nocolon",  # no NAME:
    "x:unknown=1",  # not a knob
    "x:hop",  # no value
])
def test_parse_variant_refuses(spec: str) -> None:
    with pytest.raises(ValidationError, match="variant"):
        parse_variant(spec)


def test_applied_sets_knobs_for_the_block_only() -> None:
    hop, keys, room = multihop.HOP_WEIGHT, episodes.KEY_WEIGHT, multihop.HOP_MIN_ROOM_TOKENS
    length = prior.LENGTH_WEIGHT
    with applied(Variant("v", {"keys": 0.25})):
        assert episodes.KEY_WEIGHT == 0.25
        assert multihop.HOP_WEIGHT == 0.0 and multihop.HOP_MIN_ROOM_TOKENS == 0  # unnamed: off
        assert prior.LENGTH_WEIGHT == 0.0 and prior.LENGTH_MAX_ROOM_TOKENS == 0  # the length prior too
    assert (hop, keys, room) == (multihop.HOP_WEIGHT, episodes.KEY_WEIGHT, multihop.HOP_MIN_ROOM_TOKENS)
    assert length == prior.LENGTH_WEIGHT == 0.0  # shipped off


def test_leave_one_out_chooses_on_the_other_samples() -> None:
    # "good" wins on a and b, loses badly on c: held out c, it is still chosen (on a and b)
    # and scored on c; held out a, the others are b and c, where "base" wins
    recs = {
        "base": {"2000": [("a", 1, 0.5), ("b", 1, 0.5), ("c", 1, 0.9)]},
        "good": {"2000": [("a", 1, 0.9), ("b", 1, 0.6), ("c", 1, 0.1)]},
    }
    out = leave_one_out(recs, [Variant("base", {}), Variant("good", {})], "2000")
    assert out["c"]["chosen"] == "good" and out["c"]["held_out"] == 0.1 and out["c"]["base_held_out"] == 0.9
    assert out["a"]["chosen"] == "base" and out["a"]["held_out"] == 0.5


@pytest.mark.parametrize(("knob", "module", "attr", "value"), [
    ("terse", render, "TERSE", 0),  # the render's terse headings, set back to the old form
    ("density", density, "DENSITY_WEIGHT", 0.5),  # value per token in the packing order
    ("speaker", speakers, "SPEAKER_BOOST", 0.75),  # the named participant's turns
    ("episode", rank, "EPISODE", 0.4),  # planner.rank's episode context
    ("neighbour", rank, "NEIGHBOUR", 0.0),  # planner.rank's neighbour credit
    ("excerpt", excerpt, "EXCERPT", 2),  # the excerpt fidelity's mode
    ("exlong", excerpt, "EXCERPT_LONG_TOKENS", 40),  # long lines shown as excerpts first
    ("prf", feedback, "PRF_WEIGHT", 1.0),  # pseudo-relevance feedback, the words' form
    ("rocchio", feedback, "ROCCHIO_WEIGHT", 0.5),  # and the vector's
    ("fbdocs", feedback, "FB_DOCS", 5),  # feedback turns (an int)
    ("declarative", query_text, "DECLARATIVE", 1),  # the embedded query without question words (a bool)
    ("lenup", prior, "MAX_LENGTH_UP_Z", 0.0),  # the length prior only lowering short turns
])
def test_new_knobs_reach_their_constants(knob: str, module: object, attr: str, value: float) -> None:
    before = getattr(module, attr)
    with applied(parse_variant(f"v:{knob}={value}")):
        assert getattr(module, attr) == value
        assert type(getattr(module, attr)) is type(before)  # an int knob stays an int
    assert getattr(module, attr) == before


def test_layer_knobs_set_the_memory_layers_for_the_block_only() -> None:
    layers = {"pinned": 0.1, "summary": 0.1, "tail": 0.1}
    with applied(parse_variant("v:ltail=0.05,lpinned=0"), layers):
        assert layers == {"pinned": 0.0, "summary": 0.1, "tail": 0.05}
    assert layers == {"pinned": 0.1, "summary": 0.1, "tail": 0.1}


def test_loo_one_setting_chooses_once_over_every_budget() -> None:
    # "small" wins at 500 on a and b but loses at 2000 by more: averaged over the budgets
    # "base" is chosen for held-out c; held out a, "small" is ahead on b and c on average
    result = {"samples": ["a", "b", "c"], "budgets": [500, 2000], "records": {
        "base": {"500": [("a", 1, 0.5), ("b", 1, 0.5), ("c", 2, 0.5)],
                 "2000": [("a", 1, 0.9), ("b", 1, 0.9), ("c", 2, 0.9)]},
        "small": {"500": [("a", 1, 0.7), ("b", 1, 0.6), ("c", 2, 1.0)],
                  "2000": [("a", 1, 0.5), ("b", 1, 0.6), ("c", 2, 0.9)]}}}
    out = loo_one_setting(result)
    assert out["folds"]["c"]["chosen"] == "base"  # on a, b: base 0.7 vs small 0.6
    assert out["folds"]["a"]["chosen"] == "small"  # on b, c: small 0.775 vs base 0.7
    assert out["folds"]["a"]["budgets"]["500"]["held_out"] == 0.7  # scored on a only
    assert out["folds"]["a"]["budgets"]["500"]["base_held_out"] == 0.5
    assert out["folds"]["c"]["budgets"]["2000"]["by_category"]["2"] == 0.9
    assert out["pooled"]["500"]["base"] == 0.5


def test_slice_tokens_separates_the_latest_message() -> None:
    items = [PlanItem("tail", "c", [9], "cold", "verbatim", 40, 1.0, "the latest user message is always kept"),
             PlanItem("tail", "c", [8], "cold", "verbatim", 10, 1.0, "recent turn"),
             PlanItem("retrieved", "c", [1], "cold", "excerpt", 12, 3.0, "x"),
             PlanItem("retrieved", "c", [2], "cold", "verbatim", 30, 2.0, "y")]
    # a plan whose blocks sent what its items say (tests/test_recall_rounds_layers_as_sent.py:
    # a block's header and shared headings, where they differ)
    plan = Plan("c", "q", "recall", "test", 100, tokens=92, items=items)
    assert slice_tokens(plan) == {"latest": 40, "tail": 10, "retrieved": 42}


@pytest.mark.parametrize(("spec", "budgets"), [
    ("2000", [2000]),  # one budget
    ("2000,500", [500, 2000]),  # sorted
    ("500, 2000,500,", [500, 2000]),  # spaces, a repeat and a trailing comma
])
def test_parse_budgets(spec: str, budgets: list[int]) -> None:
    assert parse_budgets(spec) == budgets
