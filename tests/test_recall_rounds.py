"""evals.recall_rounds: variants parse to the planner's knobs, are applied only for their
block, and leave-one-out chooses on the other samples, never on the held-out one."""

from __future__ import annotations

import pytest

from tiermem.evals.recall_rounds import Variant, applied, leave_one_out, parse_variant
from tiermem.planner import density, episodes, multihop, rank, render, speakers
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
    with applied(Variant("v", {"keys": 0.25})):
        assert episodes.KEY_WEIGHT == 0.25
        assert multihop.HOP_WEIGHT == 0.0 and multihop.HOP_MIN_ROOM_TOKENS == 0  # unnamed: off
    assert (hop, keys, room) == (multihop.HOP_WEIGHT, episodes.KEY_WEIGHT, multihop.HOP_MIN_ROOM_TOKENS)


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
])
def test_new_knobs_reach_their_constants(knob: str, module: object, attr: str, value: float) -> None:
    before = getattr(module, attr)
    with applied(parse_variant(f"v:{knob}={value}")):
        assert getattr(module, attr) == value
        assert type(getattr(module, attr)) is type(before)  # an int knob stays an int
    assert getattr(module, attr) == before
