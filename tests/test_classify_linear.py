"""Classifying a turn takes time linear in its length.

Invariants:
- TurnClassifier.classify reads the first CLASSIFY_MAX_CHARS characters of a turn in time
  linear in their length, whatever runs of words and hyphens or dots they hold. Before,
  three searches restarted inside a run and read to its end from each word, n squared: an
  identifier (lookaheads over "[\\w-]*"), an e-mail address ("[\\w.+-]+@") and a sentence
  ending in "?" ("[^.!?]*\\?", over a long tail after the last "?"). 16,384 characters of
  "a-" took 3-6 s per classify: one tenant's appends slowed everyone's.
- An organisation's name ("[A-Z][\\w&'-]+ " words before "Inc", "LLC", ...) is searched in
  linear time too: tried from each capital of a run with no space ("A-A-A-..."), its first
  word read to the run's end from each, n squared (0.3-0.5 s per classify at the cap).
- Nothing here times anything: each child classifies a number of different turns and must
  finish within its timeout. Linear, all of them take seconds; n squared, minutes. The turns
  are SCALE times the cap long, the cap raised as far in the child (classify reads the
  module's CLASSIFY_MAX_CHARS when called; the child checks that a question past the real
  cap is read): n squared costs SCALE squared times a classify at the cap, linear SCALE
  times, so far fewer turns tell them apart by more.
- The labels are the same as before for what is not adversarial (the last table).
"""

from __future__ import annotations

import pytest
from linear_child import finishes

from tiermem.consolidation.classify import TurnClassifier

# Per classify at the cap, on a 2-core machine at load ~2.5 (the code before each fix for n
# squared, 4f9cb7c^ and 0c383a1^; this code for linear): hyphens 3.58 s / 0.030 s, dots
# 0.72 / 0.028, question tail 0.65 / 0.019, capitals 0.37 / 0.025. At SCALE (4) times the
# cap n squared costs 16 times those, linear about 4-5 times (measured at load ~6: n squared
# dots 33 s, question tail 32 s, capitals 13 s, hyphens 37 s at twice the cap; linear
# 0.24-0.32 s each). A child classifies CALLS different turns (the labels are memoised by
# text) within TIMEOUT_S; per case, from the load-2.5 figures:
#   hyphens        4 turns: n squared 4 x 57 s = 229 s = 3.8 x 60 s; linear ~0.5 s
#   dots          12 turns: n squared 12 x 11.5 = 138 s = 2.3 x 60 s; linear ~1.5 s
#   question tail 12 turns: n squared 12 x 10.4 = 125 s = 2.1 x 60 s; linear ~1.2 s
#   capitals      24 turns: n squared 24 x 5.9 = 142 s = 2.4 x 60 s; linear ~3 s
# (at the cap itself these needed 64/128/128/320 turns, n squared 1.4-3.8 x over 60 s and
# linear 2-8 s, 17-29 s for capitals on a loaded runner; a child also starts Python and
# imports the classifier, about 1 s)
TIMEOUT_S = 60.0
SCALE = 4  # the turns' length in caps

# (a turn's body built in the child as a Python expression over its length N, what it
# exercises, how many different turns the child classifies)
INPUTS = [
    # one run of words and hyphens: the identifier's lookaheads read to its end from each word
    ("'a-' * (N // 2)", "hyphens", 4),
    # one run of words and dots: the e-mail address read to its end from each word
    ("'a.' * (N // 2)", "dots", 12),
    # a question, then a long tail with no '?': each character of the tail read to its end
    ("'Why? ' + 'a ' * (N // 2)", "question-tail", 12),
    # one run of capitals and hyphens with no space: an organisation's name ("Acme Inc") read its
    # first word to the run's end from each capital
    ("'A-' * (N // 2)", "capitals", 24),
]

CHILD = """
from tiermem.consolidation import classify
from tiermem.consolidation.classify import TurnClassifier
cap = classify.CLASSIFY_MAX_CHARS
N = classify.CLASSIFY_MAX_CHARS = {scale} * cap
# the raised cap is the one read: a question past the real cap is found
far = TurnClassifier().classify("ok. " * (cap // 4) + "Where is the nearest gym?", "user").reason
assert far == "rule:question-mark 'where is the nearest gym?'", far
body = {expr}
classifier = TurnClassifier()
for i in range({calls}):
    classifier.classify(f"{{i}} " + body, "user")
print("ok")
"""


@pytest.mark.parametrize(("expr", "what", "calls"), INPUTS)
def test_a_long_adversarial_turn_is_classified_in_linear_time(expr: str, what: str, calls: int) -> None:
    code = CHILD.format(scale=SCALE, expr=expr, calls=calls)
    finishes(code, f"{what}: {calls} turns of {SCALE} times the cap", TIMEOUT_S)


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
    # an organisation whose run opens with a plain word: its name from the run's first capital
    ("I signed with x-Birchwood Ventures LLC today.", "rule:organisation 'Birchwood Ventures LLC'"),
    # a capital inside a word is no start: the name from the next word at a boundary
    ("I signed with aB-Corvid Health today.", "rule:organisation 'Corvid Health'"),
    # the question is the sentence ending in '?', not the one before it
    ("I moved last week. Where is the nearest gym?", "rule:question-mark 'where is the nearest gym?'"),
]


@pytest.mark.parametrize(("text", "reason"), REASONS)
def test_the_rules_read_as_before(text: str, reason: str) -> None:
    assert TurnClassifier().classify(text, "user").reason == reason
