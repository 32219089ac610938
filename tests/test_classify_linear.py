"""Classifying a turn takes time linear in its length.

Invariants:
- TurnClassifier.classify reads the first CLASSIFY_MAX_CHARS characters of a turn in time
  linear in their length, whatever runs of words and hyphens or dots they hold. Before,
  three searches restarted inside a run and read to its end from each word, n squared: an
  identifier (lookaheads over "[\\w-]*"), an e-mail address ("[\\w.+-]+@") and a sentence
  ending in "?" ("[^.!?]*\\?", over a long tail after the last "?"). 16,384 characters of
  "a-" took 3-6 s per classify: one tenant's appends slowed everyone's.
- Nothing here times anything: each child classifies CLASSIFY_CALLS different turns at the
  cap and must finish within linear_child.CHILD_TIMEOUT_S. Linear, all of them take seconds; n squared,
  they take many minutes.
- The labels are the same as before for what is not adversarial (the last table).
"""

from __future__ import annotations

import pytest
from linear_child import finishes

from tiermem.consolidation.classify import TurnClassifier

CLASSIFY_CALLS = 256  # different turns per child (the labels are memoised by text): n squared is minutes

# (a turn's body built in the child as a Python expression over the cap N, what it exercises)
INPUTS = [
    # one run of words and hyphens: the identifier's lookaheads read to its end from each word
    ("'a-' * (N // 2)", "hyphens"),
    # one run of words and dots: the e-mail address read to its end from each word
    ("'a.' * (N // 2)", "dots"),
    # a question, then a long tail with no '?': each character of the tail read to its end
    ("'Why? ' + 'a ' * (N // 2)", "question-tail"),
]

CHILD = """
from tiermem.consolidation.classify import CLASSIFY_MAX_CHARS, TurnClassifier
N = CLASSIFY_MAX_CHARS
body = {expr}
classifier = TurnClassifier()
for i in range({calls}):
    classifier.classify(f"{{i}} " + body, "user")
print("ok")
"""


@pytest.mark.parametrize(("expr", "what"), INPUTS)
def test_a_long_adversarial_turn_is_classified_in_linear_time(expr: str, what: str) -> None:
    code = CHILD.format(expr=expr, calls=CLASSIFY_CALLS)
    finishes(code, f"{what}: {CLASSIFY_CALLS} turns at the cap")


# (a user turn, its reason): the rules read the same identifiers, addresses and questions
REASONS = [
    # an address whose run opens with dots: the address starts at its first word
    ("Reach me at ..jo.doe+x@mail.example.com.", "rule:contact-detail 'jo.doe+x@mail.example.com'"),
    # a phrase naming a contact detail before an address: the first to start
    ("My phone number is jo@x.io.", "rule:contact-detail 'my phone number is'"),
    # an identifier after a plain word of the same run: from the first word starting with a letter
    ("The key is live-sk_Live_4f9 for now.", "rule:identifier 'live-sk_Live_4f9'"),
    ("The key is xx-aB3cd today.", "rule:identifier 'xx-aB3cd'"),
    # a code after a digit word of the same run
    ("Server 12-INC-20931 was reopened.", "rule:identifier 'INC-20931'"),
    # the question is the sentence ending in '?', not the one before it
    ("I moved last week. Where is the nearest gym?", "rule:question-mark 'where is the nearest gym?'"),
]


@pytest.mark.parametrize(("text", "reason"), REASONS)
def test_the_rules_read_as_before(text: str, reason: str) -> None:
    assert TurnClassifier().classify(text, "user").reason == reason
