"""Turn classifier: a table of labelled cases, explainability, speed, and the eval-set targets.

Rules only (no embedder) so this file runs in well under a second; the prototype fallback is
exercised with a tiny fake embedder, not the real model.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from tiermem.consolidation.classify import INTENTS, PRIORITY, PROTOTYPES, TurnClassifier, TurnLabel
from tiermem.evals.classifier_eval import load_labels, score

CLF = TurnClassifier()

# (text, role, intent, load_bearing)
CASES: list[tuple[str, str, str, bool]] = [
    # system prompts are standing instructions, always pinned
    ("You are a support agent for Acme. Never promise refunds over $50.", "system", "instruction", True),
    # tool output is a tool_result whatever it says
    ("Traceback (most recent call last):\n  ValueError: bad input", "tool", "tool_result", False),
    ("Please never log secrets", "tool", "tool_result", False),
    # persona instruction from the user
    ("Act as a paralegal reviewing a Delaware LLC operating agreement.", "user", "instruction", True),
    # verbless constraint
    ("No red-eyes, I can't sleep on planes.", "user", "instruction", True),
    # negative imperative constraint
    ("Don't touch the public API, other teams depend on it.", "user", "instruction", True),
    # standing order
    ("From now on, always answer in French.", "user", "instruction", True),
    # a short adverbial opening before the imperative does not hide it
    ("For the backend, use CockroachDB for the database.", "user", "instruction", True),
    # ... and does not make narration an instruction
    ("At the park, we saw a dog chasing ducks.", "user", "statement", False),
    # one-shot task, imperative
    ("Add pagination to the /orders endpoint.", "user", "instruction", True),
    # request for action phrased as a question is an instruction
    ("Can you rename `list_orders` to `get_orders`?", "user", "instruction", True),
    # ...but a request for information is a question
    ("Can you explain what the yield_per option does?", "user", "question", False),
    # decision phrased as a directive
    ("Let's go with the 9am flight.", "user", "instruction", True),
    # plain wh-question
    ("What time does the pharmacy close?", "user", "question", False),
    # confirmation tag question
    ("I'm on the family plan with 5 screens, right?", "user", "question", False),
    # the assistant asking the user
    ("Could you share your order number?", "assistant", "question", False),
    # corrections, each with a different cue
    ("Actually, make it Wednesday.", "user", "correction", True),
    ("Scratch that, keep the old name.", "user", "correction", True),
    ("I don't work at Acme anymore.", "user", "correction", True),
    ("Sorry, I meant the 22nd, not the 21st.", "user", "correction", True),
    ("Forget what I said about the hotel.", "user", "correction", True),
    # "actually" that adds rather than revises is not a correction
    ("Actually, I also need a rental car.", "user", "instruction", True),
    # named entities the user introduced
    ("My daughter Maya has a recital on Saturday at 4.", "user", "statement", True),
    ("I work at Finch Labs as a data engineer.", "user", "statement", True),
    # durable personal constraints stated as facts
    ("I'm allergic to penicillin.", "user", "statement", True),
    ("My budget for the hotel is $220 a night.", "user", "statement", True),
    ("I prefer morning appointments.", "user", "statement", True),
    # a decision reached
    ("We agreed to use Postgres.", "user", "statement", True),
    # assistant turns recording a decision or booking
    ("Booked: the 9:05 flight on Wednesday, seat 22A.", "assistant", "statement", True),
    ("Decision: we'll use Postgres for the event store.", "assistant", "statement", True),
    # ordinary assistant and user statements are not pinned
    ("Redelivery is usually within two working days.", "assistant", "statement", False),
    ("I went for a run along the river this morning.", "user", "statement", False),
    # chitchat: greetings, thanks, praise, farewells
    ("Hi there", "user", "chitchat", False),
    ("thanks, you're a lifesaver", "user", "chitchat", False),
    ("Wow, that's awesome! Keep it up!", "user", "chitchat", False),
    ("Have a good evening!", "assistant", "chitchat", False),
    # a phatic question is chitchat, not a question
    ("Hey! How have you been?", "user", "chitchat", False),
    # encouragement between friends is not an order to the agent
    ("Don't give up on your dreams, you got this!", "user", "chitchat", False),
    # "keep it up" / "take care" are social imperatives
    ("Take care, and keep me posted!", "user", "chitchat", False),
]


@pytest.mark.parametrize(
    "text",
    [
        "That sign reminds me to never give up.",  # "never" inside a sentence
        "Nope, never been to something like that.",  # "never" + participle
        "Always good to hear!",  # "always" + adjective
        "I'll never forget the day my youngest took her first steps.",  # "forget" narrated
        "It's just not right.",  # "not" without a swapped value
    ],
)
def test_constraint_words_in_narration_do_not_fire(text: str) -> None:
    label = CLF.classify(text, "user")
    assert label.intent not in ("instruction", "correction") and not label.load_bearing, label.reason


@pytest.mark.parametrize(("text", "role", "intent", "load_bearing"), CASES, ids=[c[0][:40] for c in CASES])
def test_case_table(text: str, role: str, intent: str, load_bearing: bool) -> None:
    label = CLF.classify(text, role)
    assert (label.intent, label.load_bearing) == (intent, load_bearing), label.reason


def test_every_intent_appears_in_the_table() -> None:
    assert {c[2] for c in CASES} == set(INTENTS)


@pytest.mark.parametrize(("text", "role", "intent", "load_bearing"), CASES, ids=[c[0][:40] for c in CASES])
def test_reason_names_the_rule(text: str, role: str, intent: str, load_bearing: bool) -> None:
    label = CLF.classify(text, role)
    assert label.reason.startswith(("rule:", "prototype:"))
    assert len(label.reason) > len("rule:")


def test_reason_quotes_the_matched_cue() -> None:
    label = CLF.classify("Never log request bodies, they can contain card numbers.", "user")
    assert label.reason == "rule:imperative-constraint 'never'"
    label = CLF.classify("Actually, make it Wednesday.", "user")
    assert label.reason == "rule:correction-make-it 'make it wednesday'"


def test_priorities_order_pins() -> None:
    system = CLF.classify("You are a helpful assistant.", "system")
    correction = CLF.classify("Scratch that, make it Friday.", "user")
    constraint = CLF.classify("Always run ruff before you commit.", "user")
    task = CLF.classify("Write a test for the empty page.", "user")
    chit = CLF.classify("lol nice", "user")
    assert system.priority > correction.priority > constraint.priority > task.priority > chit.priority
    for lab in (system, correction, constraint, task, chit):
        assert 0 <= lab.priority <= 100
    assert set(PRIORITY.values()) <= set(range(101))


def test_label_is_frozen() -> None:
    label = CLF.classify("hello", "user")
    assert isinstance(label, TurnLabel)
    with pytest.raises(AttributeError):
        label.intent = "question"  # type: ignore[misc]


def test_unknown_role_is_rejected() -> None:
    with pytest.raises(ValueError, match="role"):
        CLF.classify("hi", "robot")


def test_empty_text_is_chitchat() -> None:
    assert CLF.classify("   ", "user").intent == "chitchat"


def test_latency_under_two_ms_per_turn() -> None:
    rows = load_labels()
    worst = 0.0
    for r in rows:
        best = min(_time_us(r.text, r.role) for _ in range(3))
        worst = max(worst, best)
    assert worst < 2000.0, f"slowest turn took {worst:.0f} µs"


def _time_us(text: str, role: str) -> float:
    t0 = time.perf_counter_ns()
    CLF.classify(text, role)
    return (time.perf_counter_ns() - t0) / 1000.0


def test_eval_set_meets_targets_rules_only() -> None:
    rows = load_labels()
    assert len(rows) >= 320
    assert {r.source for r in rows} == {"support", "assistant", "coding", "locomo"}
    result = score(rows, [CLF.classify(r.text, r.role) for r in rows])
    assert result["macro_f1"] >= 0.85, result
    assert result["load_bearing"]["recall"] >= 0.95, result


class _FakeEmbedder:
    """Bag-of-words vectors over a tiny vocabulary: enough to test the fallback plumbing."""

    VOCAB = ("thanks", "great", "wonder", "which", "answer", "did", "last", "weekend", "please", "actually")

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        out = np.zeros((len(texts), len(self.VOCAB) + 1), dtype=np.float32)
        for i, t in enumerate(texts):
            low = t.lower()
            for j, w in enumerate(self.VOCAB):
                out[i, j] = low.count(w)
            out[i, -1] = 0.1
            out[i] /= np.linalg.norm(out[i])
        return out


def test_prototype_fallback_only_when_no_rule_fires() -> None:
    fake = _FakeEmbedder()
    clf = TurnClassifier(fake)
    # A rule fires: the embedder is never consulted.
    assert clf.classify("Thanks so much!", "user").reason.startswith("rule:")
    assert fake.calls == 0
    # Nothing fires ("The blue one." has no cue): the prototypes decide or the default stands,
    # and the reason says which.
    label = clf.classify("The blue one.", "user")
    assert fake.calls >= 1
    assert label.reason.startswith(("prototype:", "rule:default-statement"))
    assert label.intent in INTENTS


def test_prototype_uses_given_embedding_without_embedding_again() -> None:
    fake = _FakeEmbedder()
    clf = TurnClassifier(fake)
    vec = fake.embed(["I wonder which one is the answer"])[0]
    calls = fake.calls
    label = clf.classify("The blue one.", "user", embedding=vec)
    # Only the one-off prototype matrix was embedded, not the turn.
    assert fake.calls == calls + 1
    assert label.reason.startswith("prototype:question"), label.reason
    assert sum(len(v) for v in PROTOTYPES.values()) > 0
