"""planner.episodes: an episode whose key (the terms it repeats, its mean meaning) matches the
question lifts all of its turns, a turn that shares no word with the question included; the
episode spread sinks an episode's later turns."""

from __future__ import annotations

import numpy as np
import pytest

from tiermem import Memory
from tiermem.planner import episodes
from tiermem.planner.episodes import episode_ids, episode_keys, episode_spread

DAY = 1_700_000_000.0
QUESTION = "What happened on the aquarium trip?"
TARGET = "Afterwards everyone napped in the car on the way home."  # no word of the question
DISTRACTOR = "Afterwards everyone napped on the sofa at home."  # the same, in another episode
SESSIONS = [
    ["The weather has been rainy all week long.", "Did you watch the football game?",
     "I repaired the kitchen sink myself.", DISTRACTOR],
    ["We drove to the aquarium early in the morning.", "The aquarium had a shark tunnel.", TARGET,
     "The kids want to go back next month."],
    ["Our team launched the billing dashboard.", "My cat keeps knocking plants off the shelf.",
     "We tried a pasta recipe with mushrooms.", "The train was delayed again."],
    ["I started reading a novel about pirates.", "The gym was crowded so I ran outside.",
     "Our neighbour is building a fence.", "I bought a second monitor."],
]


def _talk(mem: Memory) -> tuple[int, int]:
    """Four sessions, then small talk so none of them is in the tail; (target, distractor)."""
    pos: dict[str, int] = {}
    for s, turns in enumerate(SESSIONS):
        batch = [{"role": "user" if j % 2 == 0 else "assistant", "content": t, "created_at": DAY + 86_400 * s + j}
                 for j, t in enumerate(turns)]
        pos.update(zip(turns, mem.append_many("c", batch, session_id=f"s{s}"), strict=True))
    # later sessions of small talk: the four above are out of the recent tail
    for s in range(4, 10):
        tail = [{"role": "user" if j % 2 == 0 else "assistant", "content": f"Okay, talk soon ({s}, {j}).",
                 "created_at": DAY + 86_400 * s + j} for j in range(20)]
        mem.append_many("c", tail, session_id=f"s{s}")
    mem.append("c", {"role": "user", "content": QUESTION, "created_at": DAY + 86_400 * 10})
    return pos[TARGET], pos[DISTRACTOR]


def _scores(mem: Memory) -> dict[int, tuple[float, str]]:
    """The retrieved candidates' scores and reasons, shown or left out."""
    ctx = mem.context("c", QUESTION, budget=300, record=False)
    return {p: (i.score, i.reason) for i in [*ctx.plan.items, *ctx.plan.left_out] if i.slice == "retrieved"
            for p in i.positions}


def test_the_matching_episode_lifts_its_turn_without_the_questions_words(
        cold_memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    target, _distractor = _talk(cold_memory)
    monkeypatch.setattr(episodes, "KEY_WEIGHT", 0.0)
    before = _scores(cold_memory)
    monkeypatch.setattr(episodes, "KEY_WEIGHT", 1.0)
    after = _scores(cold_memory)
    assert after[target][0] - before[target][0] > 0.5  # its episode's key matched
    assert "its episode's key" in after[target][1] and "its episode's key" not in before[target][1]


def test_keys_are_per_episode_and_need_a_repeated_term(cold_memory: Memory,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    target, _d = _talk(cold_memory)
    table = cold_memory.turns.get("c")
    monkeypatch.setattr(episodes, "KEY_WEIGHT", 1.0)
    keys = episode_keys(table, QUESTION, None)  # keyword keys alone
    assert keys is not None
    ids = episode_ids(table.groups)
    i = table.index_of(target)
    assert i is not None
    lifted = set(np.flatnonzero(keys.boost).tolist())
    assert lifted == set(np.flatnonzero(ids == ids[i]).tolist())  # the whole episode, nothing else
    d = table.index_of(_d)
    assert d is not None and keys.boost[d] == 0.0  # the near-copy in another episode gets nothing
    # "shark" is said once in that episode: not in its key, so a question on it lifts nothing
    assert episode_keys(table, "Who saw a shark?", None) is None


@pytest.mark.parametrize(("weight", "want"), [
    (0.0, None),  # off
    (1.0, [0.0, -np.log(2), -np.log(3), 0.0]),  # ranks 0, 1, 2 in episode 0; episode 1's best
])
def test_episode_spread(cold_memory: Memory, monkeypatch: pytest.MonkeyPatch, weight: float,
                        want: list[float] | None) -> None:
    cold_memory.append_many("c", [{"role": "user", "content": f"turn {j}", "created_at": DAY + j} for j in range(3)],
                            session_id="a")
    cold_memory.append_many("c", [{"role": "user", "content": "other", "created_at": DAY + 9}], session_id="b")
    table = cold_memory.turns.get("c")
    monkeypatch.setattr(episodes, "SPREAD_WEIGHT", weight)
    got = episode_spread(table, np.array([3.0, 2.0, 1.0, 0.5]), np.ones(4, dtype=bool))
    if want is None:
        assert got is None
    else:
        assert got is not None
        np.testing.assert_allclose(got, want)
