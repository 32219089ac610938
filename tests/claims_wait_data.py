"""The conversation of tests/test_context_claims_wait.py and test_search_claims_wait.py:
varied turns about a few people, places and plans (so that dense ranking, neighbours and
episodes all weigh in), then questions appended one by one, each followed by a context
or a search; and that replay, which their child processes run (`replay`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tiermem import Config, Memory
from tiermem import memory as memory_module
from tiermem.tiers.embed_onnx import FastEmbedder, build_embedder

CONV = "claims-wait"
NS = "det"
SEED_AT = 1_767_000_000.0  # the first seeded turn's created_at (epoch seconds)
TURN_GAP_S = 90.0  # between seeded turns
SESSION_TURNS = 20  # seeded turns per session; sessions a day apart
DAY_S = 86_400.0

_PEOPLE = ["Maya", "Jonas", "Priya", "Tomas", "Lena", "Omar"]
_PLACES = ["the climbing gym", "Lisbon", "the farmers market", "the pottery studio", "Kyoto", "the library"]
_THINGS = ["a marathon", "a sourdough starter", "a rescue dog", "a new job in design", "a guitar recital",
           "a trip with her sister", "a vegetable garden", "a photography course"]
_MOODS = ["excited", "nervous", "tired but happy", "proud", "a bit overwhelmed", "relieved"]


def seed_messages(n: int = 300) -> list[dict[str, Any]]:
    """`n` alternating user/assistant turns, deterministic, with created_at."""
    out: list[dict[str, Any]] = []
    for i in range(n):
        p, pl = _PEOPLE[i % len(_PEOPLE)], _PLACES[(i * 5) % len(_PLACES)]
        th, mo = _THINGS[(i * 3) % len(_THINGS)], _MOODS[(i * 7) % len(_MOODS)]
        at = SEED_AT + (i // SESSION_TURNS) * DAY_S + (i % SESSION_TURNS) * TURN_GAP_S
        if i % 2 == 0:
            text = f"{p} told me about {th} at {pl}; she felt {mo} about it (note {i})."
        else:
            text = f"That sounds lovely. How long has {p} been going to {pl} for {th}?"
        out.append({"role": "user" if i % 2 == 0 else "assistant", "content": text, "created_at": at})
    return out


QUESTION_AT = SEED_AT + 10 * DAY_S  # the first question's created_at
# Memory.CLAIMED_WAIT_S in the indexer-on replays: a call waits for the turn the indexer
# claimed. With the 200 ms bound a loaded runner's indexer run now and then outlasted it,
# and the call went on without that vector, saying so (vectors_pending): by design, and
# not the race these replays assert away. The bound itself: test_a_claim_never_released_*
REPLAY_CLAIMED_WAIT_S = 60.0
QUESTIONS = [
    "When did Maya start the marathon training?",
    "What did Priya do in Kyoto?",
    "Who has a rescue dog?",
    "How did Jonas feel about the pottery studio?",
    "What is Lena growing in her vegetable garden?",
    "Where did Omar take the photography course?",
    "Which of them went to Lisbon with her sister?",
    "What did Tomas say about the guitar recital?",
]


def replay(data_dir: Path, mode: str, call: Callable[[Memory, int, str], dict[str, Any]]) -> None:
    """Append QUESTIONS one by one to the data dir's conversation, `call(mem, i, question)`
    after each, and print the calls' results as one JSON line, so that runs under
    different PYTHONHASHSEED can be compared byte for byte.

    mode bg: the background indexer on, as `tiermem serve` runs, racing each call's own
    catch-up for the turn just appended; sync: the indexer off and every turn embedded
    before the call (the reference)."""
    emb = build_embedder()
    assert isinstance(emb, FastEmbedder)
    # the query vector from the export itself (not the fused session chosen by the load):
    # the same vectors whatever else runs, as tests/conftest.py's embedder
    emb.query_session = "never"
    emb.embed(["warm-up"])  # loaded: the indexer embeds only with a loaded model
    memory_module.CLAIMED_WAIT_S = REPLAY_CLAIMED_WAIT_S
    out = []
    with Memory(Config(data_dir=data_dir), embedder=emb, hot=False, background_indexing=mode == "bg") as mem:
        for i, q in enumerate(QUESTIONS):
            mem.append(CONV, {"role": "user", "content": q}, namespace=NS, created_at=QUESTION_AT + 60 * i)
            if mode == "sync":
                mem.catch_up(CONV, namespace=NS)
            out.append(call(mem, i, q))
    print(json.dumps(out, sort_keys=True))
