"""Turn classification: one intent label per turn, plus a load-bearing flag and a pin priority.

The classifier is rule-first so that it is offline, fast (tens of microseconds per turn) and
explainable: every label carries a ``reason`` naming the rule that fired and the text it matched
(``"rule:imperative-constraint 'never'"``).  When no rule has anything to say and an embedder is
available, a nearest-prototype fallback over a few hand-written sentences per intent decides
(``"prototype:instruction sim=0.71"``).  The rules are written against general cue patterns
(imperative verbs, constraint words, question forms, correction markers, relation words plus a
capitalised name), never against a particular conversation.  The identifier, e-mail address,
organisation name and question searches read a turn (its first ``CLASSIFY_MAX_CHARS`` characters)
in time linear in its length, whatever runs of words, capitals, hyphens or dots it holds: one
tenant's turn must not slow everyone's appends.

Intents::

    question     asks for information
    correction   revises or retracts something said earlier ("actually, make it Wednesday")
    instruction  asks the agent to do something, or sets a constraint / persona (system turns)
    tool_result  output of a tool (role ``tool``)
    chitchat     greetings, thanks, praise, sympathy, acknowledgements: no new fact
    statement    a fact about the user or the world

Load-bearing turns are the ones a memory must not lose: system prompts, the user's instructions
and persistent constraints, named entities the user introduced ("my daughter Maya", "I work at
Acme"), durable personal constraints (allergies, diet, budget, preferences), decisions reached
(by either side: "let's go with the Delta", "Booked: ..."), and corrections of any of those.
An assistant's acknowledgement that names nothing it confirms ("Noted.", "Done!", "Booked.",
"Got it, thanks.": a marker with only thanks, assent, "it"/"for you" and bare numbers) is not
load-bearing: what was decided is in the user's turn before it, and the pinned block shows
each turn on its own line, so the bare reply would be a pin that says nothing.
``priority`` (0..100) orders pins when the hot tier must demote some: system > corrections >
persistent constraints > decisions and entities > one-shot tasks > everything else.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tiermem.lazyre import LazyPattern, lazy_compile
from tiermem.tiers.memo import MISS, ScopedMemo
from tiermem.tiers.models import ROLES  # the canonical roles of the turn index (one home)
from tiermem.tiers.vectors import row_dots

__all__ = [
    "INTENTS",
    "PRIORITY",
    "PROTOTYPES",
    "ROLES",
    "UNASSERTED_OPENERS",
    "TurnClassifier",
    "TurnLabel",
    "after_wish",
    "clear_memo",
    "correction_cue",
    "normalize",
    "request_tail",
    "wishes",
]

INTENTS: tuple[str, ...] = ("question", "correction", "instruction", "tool_result", "chitchat", "statement")

# Pin priorities.  Gaps are deliberate so callers can slot in their own levels.
PRIORITY: dict[str, int] = {
    "system": 95,
    "correction": 90,
    "constraint": 85,  # always/never/don't/allergy/budget/preference: wrong answers if lost
    "decision": 75,  # an option was chosen; later turns refer to it
    "entity": 70,  # a person, employer, place or identifier the user introduced
    "task": 65,  # a one-shot request; matters until done
    "statement": 30,
    "question": 20,
    "tool_result": 15,
    "chitchat": 5,
}


@dataclass(frozen=True)
class TurnLabel:
    """The classifier's verdict on one turn; ``reason`` names the rule or prototype that decided."""

    intent: str
    load_bearing: bool
    priority: int
    reason: str


# --------------------------------------------------------------------------------------------------
# Normalisation
# --------------------------------------------------------------------------------------------------

# the day names, as an alternation for patterns (here and in consolidation.supersede)
DAY_NAMES = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
# The rules read at most this much of a turn (its head), here and in supersession: they
# ran ~200 regular expressions over all of it, 2.6 s of CPU for one 900 KB message (a
# paste, an export; `max_content_bytes` is 1 MiB by default and may be set to 128 MiB),
# every append of one. Instructions,
# corrections and constraints sit in what a person types; past this is pasted material,
# which the embedding model reads only the first 256 tokens of anyway.
CLASSIFY_MAX_CHARS = 16_384
_QUOTES = str.maketrans(
    {"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": "-"}
)


def normalize(text: str) -> str:
    """Lower-case, straight quotes, single spaces: the form every intent rule matches against."""
    t = unicodedata.normalize("NFKC", text).translate(_QUOTES)
    return " ".join(t.lower().split())


def _clean(text: str) -> str:
    """Original case kept (entity rules need capitals), quotes straightened, spaces collapsed."""
    return " ".join(unicodedata.normalize("NFKC", text).translate(_QUOTES).split())


# Clause split: sentence ends, ';', and a comma before "but/so/then/please/don't/...".  Imperatives
# and constraints are detected at the
# start of a clause, so that "ping her for anything touching auth" after a comma still counts while
# a verb in the middle of a clause ("reminds me to never give up") does not.
_CLAUSE_SPLIT = lazy_compile(
    r"(?<=[.!?;:])\s+|\s*;\s*|\s+-\s+|\n+"
    # (", and ..." is not split: in narration it continues a sentence whose subject was dropped.)
    r"|,\s+(?=(?:but|so|then|or|please|don't|do not|make sure)\b)"
    # ", ping her ...", ", book it ...": an imperative with an object pronoun starts a new clause.
    r"|,\s+(?=[a-z]+ (?:her|him|them|it|me|us|that|this)\b)"
)
_LEAD_FILLER = lazy_compile(
    r"^(?:(?:ok(?:ay)?|also|and|so|then|but|oh|fine|yes|yeah|yep|sure|great|cool|hey|hi|alright|actually|"
    r"please|pls|oh and|and also|now|first|next|finally|just|hmm+|um+|well|by the way|btw)\b[,.!]?\s*)+"
)


# A short adverbial opening ("for the backend, use X", "on weekends, book Y") puts the verb
# of the clause after a comma; the clause's mood is that of what follows it.
_LEAD_ADVERBIAL = lazy_compile(
    r"^(?:for|in|on|at|with|during|regarding|as for)\b[^,]{0,40},\s+(?=[a-z])"
)


# A request or a check put after an assertion with a comma ("my flight is on the 12th, can you
# check it?", "make it 6 people, is that ok?"): one sentence, but two clauses, as with a period
# between them, so the request is judged as a request; the part before the comma asserts
# unless it asks itself ("is my flight on the 12th, can you check?"). Read whole, the
# sentence was a question where its period form is a request, and a question states nothing
# a correction may revise (supersession reads the assertive part through `request_tail` too).
_REQUEST_TAIL = lazy_compile(r",\s+(?:(?:can|could|would|will)\s+(?:you|we)|please|is\s+that\s+(?:ok|okay|alright|fine)"
                           r"|does\s+that\s+work)\b[^,]*\?[\s\"')]*$", re.IGNORECASE)
_HEAD_OPENERS = r"^\W*(?:(?:actually|so|oh|ok|okay|well|and|but|now|sorry|wait)\W+)*"
_ASKING_HEAD = lazy_compile(_HEAD_OPENERS + r"(?:what|when|where|which|who|whose|why|how|is|are|am|was|were|do|does|"
                          r"did|can|could|would|will|should|shall|may|might|have|has|had)\b", re.IGNORECASE)
# What opens a clause that holds nothing as true: a condition ("if my flight is on the 14th",
# "assuming the budget is $3,000", "in case ...", "unless ...", "whether ...") supposes it, a
# hedge ("maybe", "perhaps", "I think", "I'm not sure", "I wonder") doubts it. Such a head
# before a request states no fact: "If my flight is on the 14th instead, could you rebook?"
# asks about a possibility and revised the real "My flight is on the 12th" (request_tail).
# wishes: what the speaker would like, not what is ("I wish standup were at 10 instead")
WISH_OPENERS = ("i wish", "we wish", "i just wish", "i really wish", "if only")
UNASSERTED_OPENERS = (
    # conditions and suppositions
    "if", "even if", "only if", "what if", "unless", "assuming", "assume", "suppose", "supposing", "in case",
    "just in case", "in the event", "provided", "providing", "whether", "let's say", "hypothetically",
    "imagine",
    # hedges: the speaker is unsure of what follows
    "maybe", "perhaps", "possibly", "probably", "presumably", "i think", "i thought", "i guess", "i believe",
    "i suppose", "i assume", "i wonder", "i was wondering", "i doubt", "i'm not sure", "i am not sure",
    "not sure", "i'm unsure", "i'm guessing", "i might be wrong", "i could be wrong", "i hope",
    *WISH_OPENERS,
)
_UNASSERTED_HEAD = lazy_compile(
    _HEAD_OPENERS + r"(?:" + "|".join(o.replace(" ", r"\s+").replace("'", "['\u2019]")
                                      for o in sorted(UNASSERTED_OPENERS, key=len, reverse=True)) + r")\b",
    re.IGNORECASE)


# A sentence opened by a wish asserts nothing as a whole, question or not ("I wish my
# flight home were on Monday instead." revised the real "My flight home is on Sunday."
# by its "instead"; `supersede.assertive_text`)
_WISH_HEAD = lazy_compile(
    _HEAD_OPENERS + r"(?:" + "|".join(o.replace(" ", r"\s+") for o in sorted(WISH_OPENERS, key=len, reverse=True))
    + r")\b(?!\s+to\s+[a-z])", re.IGNORECASE)  # "I wish to update my address": a request
# where a wish's clause ends and what the speaker asserts besides begins ("I wish I'd told
# you sooner, but I moved ...", "If only I'd known: the meeting is at 4pm now.")
_WISH_CLAUSE_END = lazy_compile(r",\s*but\b|[:;]|\s+-+\s+|\s*[\u2013\u2014]\s*")
# "I meant to ask whether ...", "No wait, I wanted to ask if ...": an indirect question, the
# speaker's question put off, not a correction of what they said ("i meant" is a
# self-correction's cue otherwise; "I meant to ask for a window seat" still corrects a request)
_INDIRECT_QUESTION = lazy_compile(
    r"^(?:(?:no|oh|ok|okay|so|sorry|wait|actually|also|and|but|um+|hmm+)[,.!:]?\s+)*"
    r"(?:i|we) (?:also |actually |just |really )?(?:meant|wanted|was going|were going|was about|forgot|need|needed)"
    r" to ask (?:you )?(?:whether|if|about|how|what|when|where|who|why|which)\b")


def wishes(sentence: str) -> bool:
    """Whether `sentence` opens with a wish (WISH_OPENERS): its wish states nothing as true.
    "I wish to <verb> ..." is a request, no wish."""
    return _WISH_HEAD.match(sentence) is not None


def after_wish(sentence: str) -> str | None:
    """What `sentence`, opened by a wish (`wishes`), says after the wish's clause (after
    ", but", a colon, a semicolon or a dash): "I moved to Bergen last month." of "I wish I'd
    told you sooner, but I moved to Bergen last month."; "" where the wish is all of it ("I
    wish standup were at 10 instead."); None where `sentence` opens with no wish."""
    if not wishes(sentence):
        return None
    end = _WISH_CLAUSE_END.search(sentence)
    return sentence[end.end():].strip() if end is not None else ""


def request_tail(sentence: str) -> int | None:
    """Where a request or a check after a comma begins in `sentence` (the comma's index),
    when what comes before it asserts; None when there is none or the part before asks,
    or opens with a condition or a hedge (UNASSERTED_OPENERS)."""
    tail = _REQUEST_TAIL.search(sentence)
    if tail is None:
        return None
    head = sentence[:tail.start()].strip()
    asserts = head and not _ASKING_HEAD.match(head) and not _UNASSERTED_HEAD.match(head)
    return tail.start() if asserts else None


def _clauses(norm: str) -> list[str]:
    out = []
    for part in _CLAUSE_SPLIT.split(norm):
        at = request_tail(part)
        for c in (part,) if at is None else (part[:at], part[at + 1:]):
            c = c.strip(" ,.!-\"'")
            if c:
                c = _LEAD_FILLER.sub("", c).strip(" ,")
                out.append(_LEAD_ADVERBIAL.sub("", c))
    return [c for c in out if c]


_WORD = lazy_compile(r"[a-z0-9']+")


def _words(norm: str) -> list[str]:
    return _WORD.findall(norm)


# --------------------------------------------------------------------------------------------------
# Correction cues (shared with supersede.py)
# --------------------------------------------------------------------------------------------------

# Verbs after which "... instead" closes an order rather than a narration.
_INSTEAD_VERBS = (
    "make|use|go with|let's|switch|change|answer|book|send|set|put|move|schedule|ship|target|write|reply|"
    "respond|call|email|run|deploy"
)
# Each entry: (rule name, pattern over normalised text).  Strong cues are corrections on their own;
# "actually"-style openers (below) need a change marker too, because "actually, I also need a car"
# adds rather than revises.
_CORRECTION_STRONG: list[tuple[str, LazyPattern]] = [
    (
        "retraction",
        lazy_compile(
            r"\b(?:scratch that|never ?mind|nvm|disregard (?:that|my|what)|"
            r"ignore (?:that|my last|what i said))\b"
        ),
    ),
    (
        "retraction",
        lazy_compile(r"^(?:just |please |oh )?forget (?:what i said|that|about|the|it|my|everything)\b"),
    ),
    ("retraction", lazy_compile(r"\b(?:undo|revert) (?:that|this|it|the last|my last)\b")),
    (
        "self-correction",
        lazy_compile(r"\bi meant\b|\bmy (?:mistake|bad)\b|\bcorrection:|\bi misspoke\b|\btypo\b"),
    ),
    ("self-correction", lazy_compile(r"\b(?:i|we) (?:gave|said|typed|wrote|told) (?:you )?(?:the )?wrong\b")),
    ("self-correction", lazy_compile(r"\bi said .{1,40}\b(?:earlier|before|but)\b")),
    (
        "wait-change",
        lazy_compile(
            r"^(?:no,? wait|oh,? wait|wait,? (?:no|actually|i)|hold on\b|hang on\b|hmm+,? no\b|no no\b)"
        ),
    ),
    (
        "no-longer",
        lazy_compile(
            r"\b(?:don't|do not|doesn't|does not|no longer)\b.{0,40}\b(?:anymore|any more)\b|\bno longer\b"
        ),
    ),
    ("after-all", lazy_compile(r"\bafter all\b")),
    (
        "changed-now",
        lazy_compile(
            r"\b(?:changed|moved|switched|is|it's|are) .{0,30}\bnow\b.{0,12}\bnot\b"
            r"|\b(?:changed|moved)\b.{0,40}\bnow\b"
        ),
    ),
    (
        "change-to",
        lazy_compile(
            # a move of a plan to a new time by its other verbs ("push", "reschedule",
            # "bump"), proposed ("let's move ..."), named by its day ("tomorrow's call")
            r"^(?:(?:let's|please) )?"
            r"(?:change|switch|move|make|push|reschedule|bump|shift|postpone) "
            r"(?:it|that|this|(?:the|my|our|(?:today|tonight|tomorrow|yesterday|monday|tuesday|wednesday|thursday"
            r"|friday|saturday|sunday)'s) [\w '-]{1,30}?) (?:to|for|into)\b"
        ),
    ),
    ("make-it", lazy_compile(r"^make (?:it|that|this) [\w$:]+")),
    ("instead", lazy_compile(r"^(?:instead|rather)\b")),
    # "... instead" ends a correction when the clause is an order ("answer in English instead"),
    # not when it narrates ("I'm trying almond milk instead").
    (
        "instead",
        lazy_compile(
            rf"^(?:please )?(?:{_INSTEAD_VERBS})\b[^.!?]{{0,60}}\binstead(?: of [\w -]{{1,30}})?[.!]?$"
        ),
    ),
    ("let's-not", lazy_compile(r"^let's not\b|^(?:let's|we'll) (?:go with|use|do) .{1,30} instead\b")),
]
_CORRECTION_OPENER = lazy_compile(r"^(?:(?:hmm+|oh|oops|sorry|wait|no|um+)[,.!]?\s+)*actually\b[,]?\s*")
_CORRECTION_CHANGE = lazy_compile(
    r"\b(?:make it|change|instead|rather|not|no longer|new|now|switch|move|better|fine|prefer|meant|"
    r"it's|use)\b|"
    r"\b(?:is|are) (?:at|on|in)\b"
)
_ADDITIVE = lazy_compile(r"\b(?:also|too|as well|another|in addition|one more)\b")
# A word that reads as a value on its own: digits ("7:40", "$80", "3rd"), a day or a month.
_VALUE_WORD = (rf"(?:[\w:$.-]*\d[\w:$.-]*|{DAY_NAMES}|today|tomorrow"
               r"|tonight|january|february|march|april|may|june|july|august|september|october|november|december)")
# "it's Flat 3 not Flat 2", "the 22nd, not the 21st": a value swapped for another.
# The swapped values must look like values: separated by a comma ("6 now, not 5:30") or both
# carrying digits ("Flat 3 not Flat 2"); "it's just not right" is not a correction.
_NOT_X_BUT_Y = lazy_compile(
    # opening with the value swapped out: "Not Tuesday but Wednesday for the plumber call.";
    # both sides values ("Not bad but the room was small" swaps nothing)
    rf"^(?:(?:no|sorry|oops|wait)[,.!]?\s+)?not (?:the |on |at )?{_VALUE_WORD},? but (?:the |on |at )?{_VALUE_WORD}\b"
    # ... or the new value after a comma alone, ending the clause, a unit at most: "Not
    # Tuesday, Wednesday.", "Not 3, 5 boxes." ("Not today, thanks" swaps no value)
    rf"|^(?:(?:no|sorry|oops|wait)[,.!]?\s+)?not (?:the |on |at )?{_VALUE_WORD}, (?:the |on |at )?{_VALUE_WORD}"
    r"(?: [a-z]+)?$"
    r"|\b(?:it's|it is|is|was|meant|at|on)\b[^.!?]{1,40}?, not (?:the |a |an )?[\w:$.-]+(?: [\w:$.-]+)?[.!]?$"
    r"|\b(?:it's|it is|is|was|meant|at|on)\b[^.!?,]{0,30}\d[^.!?,]{0,10} not (?:the |a |"
    r"an )?[\w:$.-]*\d[\w:$.-]*[.!]?$"
)


# Results of `correction_cue` and `TurnClassifier.classify` remembered per text: both are
# pure functions of their arguments (the compiled rules never change), and the write path
# asks the same text twice (the classifier, then supersession's assertion check). Found
# again only in the memo scope they were computed in (tiers.memo: a text another tenant
# wrote is never answered faster). Bounded; emptied when full, which costs a
# recomputation, never another answer.
MEMO_MAX_ENTRIES = 8192
MEMO_MAX_CHARS = 4000  # longer texts are rare and not asked twice
_cue_memo: ScopedMemo[tuple[str, str], tuple[str, str] | None] = ScopedMemo(MEMO_MAX_ENTRIES)
_label_memo: ScopedMemo[tuple[str, str], TurnLabel] = ScopedMemo(MEMO_MAX_ENTRIES)  # classify() without an embedder


def clear_memo() -> None:
    """Forget every remembered text, of every scope (an erasure must leave no copy of a
    turn's text)."""
    _cue_memo.clear()
    _label_memo.clear()


def _remember(memo: ScopedMemo[tuple[str, str], Any], key: tuple[str, str], value: Any) -> None:
    if len(key[0]) <= MEMO_MAX_CHARS:
        memo.put(key, value)


def correction_cue(norm: str, role: str = "user", *,
                   clauses: Sequence[str] | None = None) -> tuple[str, str] | None:
    """Return ``(rule, matched text)`` when ``norm`` (normalised text) revises an earlier turn.
    ``clauses``: ``_clauses(norm)`` when the caller has it already (a shortcut only)."""
    key = (norm, role)
    hit = _cue_memo.get(key, MISS)
    if hit is not MISS:
        return hit  # type: ignore[return-value]
    got = _correction_cue(norm, role, (clauses if clauses is not None else _clauses(norm)) or [norm])
    _remember(_cue_memo, key, got)
    return got


def _correction_cue(norm: str, role: str, clauses: Sequence[str]) -> tuple[str, str] | None:
    if _INDIRECT_QUESTION.match(norm):
        return None  # "no wait, i meant to ask whether ...": a question put off, nothing revised
    for name, pat in _CORRECTION_STRONG:
        # Patterns anchored with '^' describe how a clause opens; the others can match anywhere.
        for c in (norm, *clauses) if pat.pattern.startswith("^") else (norm,):
            m = pat.search(c)
            if m:
                return name, m.group(0).strip()
    if role == "assistant":  # weaker cues below fire too often on an agent's own narration
        return None
    m = _CORRECTION_OPENER.match(norm)
    if m:
        rest = norm[m.end() :]
        asks = rest.startswith(("can you", "could you", "do you", "what", "how"))
        # "actually, hold off on the upgrade": an order after "actually" revises the last one.
        changes = _CORRECTION_CHANGE.search(rest) or _slot_value(rest) or _IMPERATIVE_START.match(rest)
        if not _ADDITIVE.search(rest) and not asks and changes:
            return "actually-change", m.group(0).strip(" ,")
    for c in clauses:
        m2 = _NOT_X_BUT_Y.search(c)
        if m2 and not _IMPERATIVE_START.match(c):
            return "not-x-but-y", m2.group(0).strip()
    return None


def _slot_value(s: str) -> bool:
    """Whether `s` holds a value: a time, a number or a word with a digit in it (a model or
    a code, "toner 26x", "room 4b"), a day or days ("on wednesdays"), a number word."""
    return bool(
        re.search(
            rf"\b(?:\d+(?::\d\d)?\s*(?:am|pm)|[a-z]*\d[\w-]*|(?:{DAY_NAMES})s?|"
            r"one|two|three|four|five|six|seven|eight|nine|ten|twelve|twenty)\b",
            s,
        )
    )


# --------------------------------------------------------------------------------------------------
# Instruction cues
# --------------------------------------------------------------------------------------------------

# Verbs that, at the start of a clause, make it a request to the agent.  Social imperatives
# ("keep it up", "take care", "look at this") are excluded by _SOCIAL_IMPERATIVE below.
# fmt: off
_TASK_VERBS: tuple[str, ...] = (
    "act", "add", "adjust", "answer", "apply", "archive", "assume", "avoid", "be", "book", "bump", "buy",
    "call", "cancel", "change", "check", "choose", "clean", "close", "commit", "compare", "concentrate",
    "confirm", "convert", "copy", "create", "cut", "deploy", "disable", "downgrade", "draft", "drop",
    "email", "enable", "exclude", "export", "file", "find", "fix", "flag", "focus", "forward", "gate",
    "get", "give", "hold", "ignore", "import", "include", "install", "invite", "keep", "limit", "list",
    "loop", "mark", "merge", "message", "migrate", "move", "notify", "open", "order", "pay", "pick", "pin",
    "ping", "plan", "post", "prioritize", "push", "put", "rebase", "reboot", "refactor", "refund", "remind",
    "remove", "rename", "renew", "reply", "reserve", "reset", "respond", "restart", "restrict", "return",
    "revert", "review", "rewrite", "run", "schedule", "search", "send", "set", "ship", "show", "sign",
    "skip", "sort", "split", "start", "stick", "stop", "submit", "summarize", "swap", "switch", "tag",
    "target", "test", "text", "track", "translate", "treat", "try", "turn", "undo", "update", "upgrade",
    "upload", "use", "verify", "wait", "write",
)
# fmt: on
_IMPERATIVE_START = lazy_compile(
    r"^(?:please |pls |just |now |also |kindly )?(?:"
    + "|".join(_TASK_VERBS)
    + r"|go (?:with|back|ahead))\b(?! you\b)"
)
_SOCIAL_IMPERATIVE = lazy_compile(
    r"^(?:keep (?:it up|going|me posted|me updated|up the|at it|in touch|smiling|spreading|improving|"
    r"rocking|pushing|doing|being|chasing|working hard)|take care|look at|check (?:\w+ ){0,2}out\b|go for it|"
    r"have (?:a|an|fun)|enjoy|see (?:ya|you)|let me know|get well|stay (?:safe|strong|tuned)|"
    r"try (?:it|not to worry)|push through|give it a (?:shot|try|go)|sign me up|show me (?:a|one|some) (?:pic|photo)|"
    r"keep on|keep (?:[a-z]+ing)\b|believe in|trust (?:me|yourself|the)|remember (?:that|you)|"
    # encouragement between people, not orders to an agent
    r"(?:make sure you |be sure you )?(?:don't|do not|never) (?:give up|quit(?![ \w])|be afraid|be so|be too|worry|hesitate|stress|lose|ever|"
    # "don't let the setbacks get you down": the listener's feelings, not the agent's work
    r"let (?:\w+ ){1,5}?(?:get|bring|keep|hold|stop|define) you\b|"
    r"stop believing|say never|"
    r"forget (?:that|to (?:take care|smile|have))|let (?:it|them|anyone|anything)))"
)
# Advice to a person ("do your research", "follow your dreams") uses second person and no first
# person; instructions to an agent are about the user's things ("my", "me") or the agent's output.
_ADVICE = lazy_compile(r"\b(?:your|yours|yourself)\b")
_AGENT_OUTPUT = lazy_compile(
    r"\byour (?:answers?|responses?|replies|reply|tone|output|messages?|code|summary|"
    r"summaries|suggestions?)\b"
)
_FIRST_PERSON_OBJ = lazy_compile(r"\b(?:me|my|mine|us|our)\b")


def _is_advice(clause: str) -> bool:
    if not _ADVICE.search(clause):
        return False
    return not _AGENT_OUTPUT.search(clause) and not _FIRST_PERSON_OBJ.search(clause)


# A reminder ("don't forget to ...", "remember to ...") is an order to the agent only when
# what it asks is a service act; "don't forget to prepare emotionally" and "remember to stay
# positive" are advice to a person, whoever says them.
_REMINDER_VERBS: tuple[str, ...] = (*_TASK_VERBS, "attach", "bring", "cc", "double-check", "log",
                                    "mention", "note", "save")
_REMINDER_ACT = r"(?:" + "|".join(_REMINDER_VERBS) + r")\b"
# A verb in the past after "never" narrates ("never saw this coming", "never worked out"); an
# order has the base form. "-eed" words (need, feed, exceed) are base forms, not pasts.
_NARRATED_PAST = (r"[a-z]+[^e\W]ed\b|saw|came|went|did|made|said|told|was|were|could|would|should|"
                  r"will|once|seemed|quite")
# "always" before a participle or a state describes ("always supporting each other", "always
# full of memories"); "always bring my ID" is an order, so "bring" is not a participle, and
# "always in English" may be one, so no preposition is listed.
_DESCRIBED_STATE = r"(?!bring\b)[a-z]+ing\b|full|ready|busy|welcome|willing|better|best"

_CONSTRAINT = lazy_compile(
    # "always"/"never"/"don't" open an order only when a verb follows, not "always good to hear",
    # "never been there", "don't you think", "don't feel like it".
    r"^(?:always(?! (?:good|great|nice|happy|here|there|a|an|so|been|fun|glad|down|up|"
    + _DESCRIBED_STATE + r"))|"
    # "never mind (the restaurant)" takes something back, it orders nothing for later: a
    # retraction that revised nothing is labelled as an ordinary turn (supersede `_demote`)
    r"never(?! (?:mind|been|had|seen|heard|thought|done|tried|gone|knew|known|got|felt|met|used|really|"
    r"expected|imagined|realized|stopped|liked|ever|" + _NARRATED_PAST + r"))|"
    r"(?:don't|do not|dont)(?! (?:you|they|we|it|i|he|she|think|know|feel|get|understand|mind|care|"
    r"really|remember|even|like|want|have|see|believe|worry|blame)\b| forget to (?!" + _REMINDER_ACT + r"))|"
    r"make sure|be sure|remember to(?= " + _REMINDER_ACT + r")|no more|avoid|only)\b|"
    r"(?<!i'll )(?<!i will )\b(?:from now on|for all (?:future|correspondence)|at all times|"
    r"every time you)\b(?!.*\bi'll\b)|"
    r"^(?:going|moving) forward\b|\b(?:going|moving) forward[.!]?$|"
    # "no red-eyes", "no meat suggestions"; not "no worries", "no way"
    r"^no (?!worries|problem|prob|probs|way|idea|thanks|wait|need|rush|biggie|doubt|kidding|sweat|joke|"
    r"matter|one|pressure|clue|big deal|offense|offence|shame|surprise|wonder|question)"
    r"[a-z-]+(?: [a-z-]+)?\b"
)
_PERSONA = lazy_compile(r"^(?:act as|you are|you're|pretend|play the role|respond as|answer as|behave as)\b")
_PERSONA_VERB = lazy_compile(r"\b(?:act as|pretend|role|respond as|answer as|behave as)\b")
_REQUEST_MODAL = lazy_compile(
    r"^(?:can|could|would|will) you (?:please |also |just |quickly )?(?!like|tell|explain|say|remind me what|"
    r"clarify|describe|confirm whether|think|believe|know|recommend|suggest|imagine|see|hear|guess)([a-z]+)"
)
# "I want to cancel X" is a request; "I want to get stronger" is a goal.  Only service verbs count
# after "to", and only need/would-like (not "want", "love") before a noun.
_WANT = lazy_compile(
    r"^(?:i(?: also| just| really| still)?(?: need| want| would like|'d like)|we(?: would like|'d like))"
    r"(?: you)? to (?:" + "|".join(_TASK_VERBS) + r")\b"
    r"|^(?:i|we)(?: also| just| really| still)?(?: need|'d like| would like) "
    r"(?:a |an |the |some |my |something|anything|one\b|flights?\b)"
)
_GO_AHEAD = lazy_compile(
    r"^(?:(?:ok(?:ay)?|yes|yeah|yep|sure)[,!. ]*)?(?:go ahead|do it|do that|book it|send it|ship it|"
    r"yes,? please|please do|let's do it|make it so|proceed|cancel it|confirm it)\b"
)
_LETS_DECIDE = lazy_compile(
    r"\blet's (?:go with|use|do (?:that|it|the|this)|book|ship|take|pick|choose|stick with|switch|"
    r"keep (?:it(?! up)|the|using)|try the|get the|move|schedule|deploy|merge|call it|go for the)\b"
)
# "The adjuster should call my cell", "Pets must be allowed": an obligation on a third party.
# Epistemic uses ("it must be scary", "you should be proud") are excluded by subject and by
# requiring a verb or a passive participle after the modal.
_MODAL_DIRECTIVE = lazy_compile(
    r"^(?!(?:you|i|we|it|that|this|there|everyone|everything|things|life|my|our|his|her|their)\b)"
    r"(?:the |all |any |every )?[a-z-]+(?: [a-z-]+)? (?:should|must|needs to|need to|has to|have to|shall) "
    r"(?:be (?:\w+ed|done|sent|kept|paid|shown|written|given|taken|made)\b"
    r"|(?!be\b|have\b|feel\b|know\b)[a-z]+)"
)
_PLEASE = lazy_compile(r"\bplease\b|\bpls\b")
# A courtesy put as an order ("No need to thank me.", "No need to apologise for the
# delay.", "Don't mention it."): it answers a thanks or an apology and asks nothing of
# anyone later, yet "no need to <verb>" reads as _MODAL_DIRECTIVE (the subject "no") and
# "don't <verb>" as _CONSTRAINT, so it was pinned at the constraint priority (85). Only
# the formula as the whole turn counts (`fullmatch` of the normalized turn): a "please"
# beside "no need" (not "please don't ...": that asks) or a lead that answers a thanks
# (_COURTESY_LEAD), what the thanks or apology was for from a closed list
# (_COURTESY_FOR), a trailing adverb of emphasis (_COURTESY_ADVERB), and a closing ".",
# "!" or emoticon (_COURTESY_END). Anything more is judged as before, an order where it
# reads as one: "Don't apologize for errors.", "Please don't mention it.", "Don't mention
# it, it's a secret.", "Don't thank me, and never use emojis.", "No need to thank me every
# time." (a taking out of the formula from a longer turn, 226c27a, un-pinned those).
_COURTESY_ACT = (
    r"(?:thank (?:me|us)|apologi[sz]e|say (?:sorry|thanks|thank you)|be sorry|feel (?:bad|sorry|guilty)"
    r"|worry(?: about (?:it|that|me|us))?|rush|hurry)"
)
# one lead before the formula ("Oh, no need to thank me!", "You're welcome! No need to
# thank me."); "oh please, ..." is no lead (a please after it: judged as before)
_COURTESY_LEAD = r"(?P<lead>(?:oh|aw|hey|not at all|you're welcome|youre welcome|no worries)[,.!]* )"
# what the thanks or apology was for: the one just made, never a kind of thing ("for
# errors", "for delays in future replies", "for my questions" are standing wishes): a
# determiner and one or two words naming a delay or a slip
_COURTESY_SLIP = (
    r"(?:(?:little |small |long )?(?:delay|wait|trouble|confusion|mess|typo|hassle|mix-?up|mix up)"
    r"|(?:late|slow) (?:reply|response|answer))"
)
_COURTESY_FOR = r"(?: for (?:that|this|it|(?:the|my|this|that) " + _COURTESY_SLIP + r"))?"
# emphasis, not when or how often ("at all", "really"; "ever", "every time" are not here)
_COURTESY_ADVERB = r"(?:,? (?:at all|really|honestly|though|seriously|either|on my account))*"
# a closing ".", "!", a text emoticon (lower-cased: ":d") or an emoji with its modifiers
_COURTESY_EMOTICON = r"(?:[:;]-?[)(dp]|<3|\^\^|[\U0001F300-\U0001FAFF\u2600-\u27BF\uFE0F\u200D])"
_COURTESY_END = r"(?:\s*(?:[.!]|" + _COURTESY_EMOTICON + r"))*"
_COURTESY = lazy_compile(
    r"(?:" + _COURTESY_LEAD + r"|please,? (?=no |there))?"
    r"(?:(?:(?:there's |there is )?no need (?:to |for you to )" + _COURTESY_ACT
    + r"|no (?:need for )?(?:thanks|apologies|apology) (?:needed|necessary|required))"
    + _COURTESY_FOR + _COURTESY_ADVERB + r"(?:,? please)?"
    + r"|(?:don't|do not|dont) (?:thank (?:me|us)|apologi[sz]e|mention it|be sorry)" + _COURTESY_FOR
    + r")" + _COURTESY_END
)


def _without_courtesy(norm: str, clauses: Sequence[str]) -> tuple[str, list[str]]:
    """The turn and its clauses, or nothing where the whole turn is a courtesy formula
    (_COURTESY): then no instruction rule reads it."""
    if _COURTESY.fullmatch(norm) is None:
        return norm, list(clauses)
    return "", []
_REMIND = lazy_compile(r"\bkeep (?:that|this|it) in mind\b")


def _instruction_cue(norm: str, clauses: Sequence[str], role: str) -> tuple[str, str, bool] | None:
    """(rule, match, persistent) when the turn asks the agent to do something or sets a constraint."""
    if role != "user":
        return None
    norm, clauses = _without_courtesy(norm, clauses)
    for c in clauses:
        m = _CONSTRAINT.search(c)
        if m and not _SOCIAL_IMPERATIVE.match(c) and not _is_advice(c):
            return "imperative-constraint", m.group(0).strip(), True
    for c in clauses:
        m = _PERSONA.match(c)
        if m and _PERSONA_VERB.search(c):
            return "persona", m.group(0), True
    for c in clauses:
        m = _GO_AHEAD.match(c)
        if m:
            return "go-ahead", m.group(0).strip(" ,"), False
    m = _LETS_DECIDE.search(norm)
    if m:
        return "decision", m.group(0), False
    for c in clauses:
        m = _REQUEST_MODAL.match(c)
        if m:
            return "polite-request", m.group(0), False
        m = _WANT.match(c)
        if m:
            return "want-request", m.group(0).strip(), False
        if _SOCIAL_IMPERATIVE.match(c) or _is_advice(c):
            continue
        m = _IMPERATIVE_START.match(c)
        if m:
            return "imperative", m.group(0).strip(), False
    m = _REMIND.search(norm)
    if m:
        return "remind", m.group(0), True
    if "?" not in norm:
        for c in clauses:
            m = _MODAL_DIRECTIVE.match(c)
            if m:
                return "modal-directive", m.group(0), True
    if "?" not in norm:
        m = _PLEASE.search(norm)
        if m:
            return "please", m.group(0), False
    return None


# --------------------------------------------------------------------------------------------------
# Question cues
# --------------------------------------------------------------------------------------------------

_PHATIC_Q = lazy_compile(
    # "how are you?" alone is phatic; "how are you holding up?" is a real question.
    r"\bhow (?:are|have) you(?: been| doing)?(?: today| lately| these days)?\s*(?:\?|$)|"
    r"\b(?:how's it going|how are things|what's up|whats up|"
    r"how can i help|how may i help|what can i do for you|anything else i can (?:help|do)|"
    r"what's on your (?:list|mind|plate)|how was your (?:day|weekend)|you good|what's new|"
    r"anything new(?: with you)?|"
    r"anything (?:new|exciting) going on|what's going on with you)\b"
)
_RHETORICAL_TAG = lazy_compile(r",?\s*(?:ya know|you know|alright|ok|okay|right guys|huh)\?\s*$")
# A sentence that ends in '?': it starts where a sentence does (the text's start or just after
# a '.', '!' or '?'), as any match did; tried from every character, "[^.!?]*" ran to the next
# mark from each, n squared over a long tail after the last '?' ("Why? " and 16,000 characters)
_Q_SENTENCE = lazy_compile(r"(?:^|(?<=[.!?]))[^.!?]*+\?")
# A question typed without '?': "do you know why CI uses node 18".
_WH_START = lazy_compile(
    r"^(?:what|when|where|which|who|why|how|is there|are there|do you|does|can i|should i)\b"
)
_EXCLAMATIVE = lazy_compile(
    r"^(?:what an?|how (?:nice|great|cool|sweet|lovely|awesome|wonderful|fun|kind|sad|awful))\b"
)


def _question_cue(norm: str, clauses: Sequence[str]) -> tuple[str, str] | None:
    if "?" in norm:
        # Keep only the sentences that end in '?', minus rhetorical tags ("..., ya know?").
        qs = [q for q in _Q_SENTENCE.findall(norm) if q.strip() and not _RHETORICAL_TAG.search(q)]
        real = [q for q in qs if not _PHATIC_Q.search(q)]
        if real:
            return "question-mark", real[-1].strip()[-40:]
        if qs:
            return "phatic-question", qs[-1].strip()[-40:]
        return None
    for c in clauses[-2:]:
        # "do you know why ..." without '?' (typed fast) is still a question; "what a day" is not.
        if (
            _WH_START.match(c)
            and len(_words(c)) >= 3
            and not _PHATIC_Q.search(c)
            and not _EXCLAMATIVE.match(c)
        ):
            return "wh-question", c.split()[0]
    return None


# --------------------------------------------------------------------------------------------------
# Load-bearing statements
# --------------------------------------------------------------------------------------------------

_RELATIONS = (
    "wife|husband|partner|spouse|fianc[eé]e?|girlfriend|boyfriend|son|daughter|kid|child|baby|mom|mum|mother|"
    "dad|father|sister|brother|sibling|grandma|grandmother|grandpa|grandfather|aunt|uncle|cousin|niece|nephew|"
    "friend|roommate|neighbou?r|boss|manager|colleague|coworker|co-worker|teammate|assistant|lawyer|"
    "accountant|doctor|dentist|therapist|vet|nurse|landlord|dog|cat|puppy|kitten|pet|horse|bird|company|"
    "employer|team|school|clinic|bank|client|customer|owner|admin|lead"
)
# Function words that are capitalised only because a sentence starts with them.
# fmt: off
_STOP_CAPS = {
    "The", "A", "An", "I", "It", "It's", "He", "She", "They", "We", "You", "This", "That", "And", "But",
    "So", "Or", "My", "Our", "Her", "His", "Their", "Its", "In", "On", "At", "To", "For", "Of", "With",
    "Yes", "No", "Oh", "Hey", "Hi", "Thanks", "Wow", "What", "When", "Where", "Why", "How", "Who", "Is",
    "Are", "Was", "Were", "Do", "Does", "Did", "Can", "Could", "Would", "Will", "Monday", "Tuesday",
    "Wednesday", "Thursday", "Friday", "Saturday", "Sunday",
}
# fmt: on
_CAP = r"(?:Dr\.? |Mr\.? |Mrs\.? |Ms\.? )?[A-Z][a-zA-Z'-]+(?: [A-Z][a-zA-Z'-]+)?"
_NAMED_RELATION = lazy_compile(
    rf"\b(?:[Mm]y|[Oo]ur)(?: [a-z-]+)? (?:{_RELATIONS})s?(?:'s name)?(?:,| is| named| called|'s)? ({_CAP})"
)
_NAME_IS = lazy_compile(
    rf"\b(?:[Hh]is|[Hh]er|[Tt]heir|[Mm]y|[Ii]ts) name is ({_CAP})"
    rf"|\b(?:{_RELATIONS})s? (?:named|called) ({_CAP})"
    rf"|\bcall me ({_CAP})"
    # the name the speaker goes by: "By the way, I go by Lexi."
    rf"|\b[Ii] go by ({_CAP})"
)
_NAMED_ME = lazy_compile(rf"\bI named (?:him|her|it|them) ({_CAP})")
_WORK_LIVE = lazy_compile(
    rf"\bI(?:'m| am| will)? (?:work(?:ing)? (?:at|for)|(?:live|living|based) in|study at|moved to|"
    rf"employed (?:at|by)|at|start(?:ing)? at|started at|join(?:ing|ed)?) ({_CAP})"
    rf"|\b(?:we're|we are|i'm|i am) (?:on|with) the ({_CAP}) plan\b"
)
# An organisation named by its legal or sector suffix: "Birchwood Ventures LLC", "Corvid Health";
# the name is group 1. Its first word runs to the end of its run of [\w&'-] (a space must
# follow), so the name matches from a capital inside a run if and only if from the run's first
# capital at a word boundary: only that one is tried (atomic), and each word is possessive.
# Tried from each capital of a run with no space ("Aa-Aa-..."), it read to the run's end from
# each, n squared (0.3 s at the 16,384-character cap).
_ORG = lazy_compile(
    r"(?<![\w&'-])(?>[\w&'-]*?\b(?=[A-Z]))"
    r"((?:[A-Z][\w&'-]++ ){1,3}(?:LLC|L\.L\.C\.|Inc|Ltd|Corp|Corporation|GmbH|AG|SA|PLC|LLP|Group|Labs|"
    r"Holdings|Ventures|Partners|Capital|Bank|Insurance|Health|Clinic|Hospital|University|College|School|"
    r"Foundation|Agency)\b)"
)
# "we have a golden retriever named Biscuit": a named thing the user owns or has.
_HAVE_NAMED = lazy_compile(
    rf"\b(?:[Ii]|[Ww]e|[Mm]y \w+) (?:have|has|got|adopted|own)\b[^.!?]{{0,40}}\b(?:named|called) ({_CAP})"
)
# The user's technical environment: "runs on Java 17", "prod is still on 13", "we use Postgres 15".
_TECH_VERSION = lazy_compile(
    r"\b(?:runs? on|running|uses?|using|is|are|still on|pinned to|requires?|on)\s+"
    r"[A-Z][\w.+#-]*(?: [A-Z][\w.+#-]*)? v?\d+(?:\.\d+)*\b"
)
# A day of the month as the value a thing is on ("My flight is on the 12th.", "Sorry, it's on
# the 12th."): load-bearing as the same sentence with its month is ("is on March 12", which
# _TECH_VERSION reads), so a correction of it ("The dentist moved to the 12th.") revises a
# pinned turn and is pinned as one with the month is. Only after "is/are (on)" or "'s on",
# the places where the month form pins, and only as a day, not a floor or a row ("on the 9th
# floor"): a word other than a preposition or a conjunction after it names a thing of its own.
_DAY_OF_MONTH_VALUE = lazy_compile(
    r"\b(?:(?:is|are|'s|'re|was|were) on|is|are) the \d{1,2}(?:st|nd|rd|th)\b"
    r"(?=\s*(?:$|[^\w\s]|(?:at|for|of|in|and|or|but|so|then|until|from|to|with|this|next)\b))"
)
# A date with its day before its month ("I was born on the 12th of May.", "The merger closes
# on 14 March."): the same date as "on May 12", which pins (_TECH_VERSION reads a month and a
# number after "on", "is" or "are"), so it pins in the same positions. The month ends the
# date: a mark, a year, a preposition or a conjunction may follow, not a verb ("on the 2nd
# of may be" is no date).
_MONTH_NAMES = ("january|february|march|april|may|june|july|august|september|october|november|december|"
                "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec")
_DAY_MONTH_DATE = lazy_compile(
    rf"\b(?:on|is|are) (?:the )?\d{{1,2}}(?:st|nd|rd|th)? (?:of )?(?:{_MONTH_NAMES})\b"
    r"(?=\.?\s*(?:$|[^\w\s]|\d|(?:at|for|in|and|or|but|so|then|until|from|to|with|this|next)\b))"
)
# A price ceiling or floor: "under $2,400 a month", "no more than 300 euros".
_MONEY_CAP = lazy_compile(
    r"\b(?:under|below|max(?:imum)?|at most|no more than|up to|less than|within|over|at least)\s+"
    r"(?:[$€£]\s?\d|\d[\d,.]*\s?(?:dollars|euros|pounds|usd|eur|gbp))"
)
# Diet and health words count only with a person as subject ("I'm vegan", not "vegan recipes").
_SUBJ = (
    r"(?:i|we|she|he|they|my \w+|our \w+|(?!you\b|who\b|which\b|that\b|what\b)[a-z]+)"
    r"(?:'m|'re|'s| am| are| is| was| wasn't| got| became|'ve been| have been)"
    r"(?: (?!you\b)[a-z-]+)?"
)
_CONDITION = lazy_compile(
    rf"\b{_SUBJ} (?:allergic|intolerant|celiac|coeliac|vegetarian|vegan|kosher|halal|diabetic|pregnant|"
    r"gluten[- ]free|in a wheelchair)\b"
)
# The subject-plus-copula pattern above is the slowest in the module; run it only when one of
# its keywords is present.
_CONDITION_GATE = lazy_compile(
    r"allergic|intoleran|celiac|coeliac|vegetarian|vegan|kosher|halal|diabetic|"
    r"pregnant|gluten|wheelchair"
)
# "I don't want future generations to go through that" wishes something for others; a
# preference names the speaker's own things ("I don't want my kids to see it", "we don't want
# anything touristy") or the agent ("I don't want you to call before 9").
_WISHED_ON_OTHERS = (r"(?!(?:you|me|us|my|our|any\w*|some\w*|to|it|that|this|him|her|them)\b)"
                     r"(?:\w+ ){1,3}to (?!be\b)\w+")
_PERSONAL_CONSTRAINT = lazy_compile(
    r"\b(?:my|her|his|our) (?:\w+ )?(?:allergy|allergies|intolerance|diabetes|diet)\b|"
    r"\b(?:i|we|she|he|they|my \w+) (?:have|has) (?:an? )?(?:\w+ )?(?:allergy|intolerance|diabetes)\b|"
    r"\b(?:i|we|she|he|they|my \w+) (?:can't|cannot|can not) (?:have|eat|drink|fly|take)\b|"
    r"\b(?:i|we|she|he|they|my \w+) (?:don't|doesn't|do not|does not) (?:eat|drink)\b|"
    r"\b(?:"
    r"my budget|budget (?:is|of)|i prefer|i'd prefer|i would prefer|i'd rather|i would rather|i hate|"
    r"(?:i|we) (?:don't|do not) (?:like|want(?! " + _WISHED_ON_OTHERS + r"))|i dislike|i can't stand|"
    r"i take \d+ ?(?:mg|mcg|g|ml|units?)|\d+ ?(?:mg|mcg) of)\b|"
    # a standing preference or rule given as a label ("Seat preference: aisle, every time.",
    # "Travel rule for me: absolutely no red-eyes") or as the one thing to avoid
    r"\b(?:preference|rule)(?: for (?:me|us))?: ?\S|\b(?:only|one) things? to avoid (?:is|are)\b"
)
_DECISION_STMT = lazy_compile(
    r"\b(?:we agreed (?:on|to|that)|we (?:decided|settled) (?:on|to go with|to use|to book|that)|"
    r"we (?:chose|went with|picked) the|i(?:'ll| will) take|"
    r"i (?:decided|chose|picked|went with) (?:on |to go with |to use |to book |the )|"
    r"(?:the plan|decision) is)\b"
)
# A short acceptance of an offered option: "Thursday 9am is fine.", "Tuesday works."
_ACCEPT = lazy_compile(
    r"^(?!that|this|it|which|everything|all)[\w: ,.$-]{1,30}? (?:is fine|works(?: for me)?|"
    r"is perfect|sounds perfect)[.!]?$"
)
# An identifier: a word of letters mixed with digits and capitals or "_" ("sk_live_4f9",
# "gpt4Turbo"), or a code ("INC-20931"). Both lie inside one run of [\w-]; _identifier tries
# the first only at the run's first word that starts with a letter (the digit and the capital
# may come anywhere after its start, so if they are not after the first such word they are
# after none), as searching from each word of "a-a-a-..." read to the run's end, n squared.
# Both hold a digit: only the runs with one are read (prose has few)
_ID_RUN = lazy_compile(r"(?<![\w-])[\w-]*?\d[\w-]*+")
_ID_LETTER_START = lazy_compile(r"\b[A-Za-z]")
_ID_MIXED = lazy_compile(r"(?=[\w-]*\d)(?=[\w-]*(?:[A-Z]|_))[A-Za-z][\w-]{3,}\b")
_ID_CODE = lazy_compile(r"\b[A-Z0-9]{2,}-\d{3,}\b")
# An e-mail address: it runs from the first word of its run of [\w.+-] to the "@" at the run's
# end, so _contact tries it only there (from each word of "a.a.a...." it read to the run's
# end, n squared); the phrases naming a contact detail or an account number are searched apart
_EMAIL = lazy_compile(r"(?<![\w.+-])[.+-]*+(\w[\w.+-]*+@[\w-]+\.[\w.]+\b)")
_CONTACT_PHRASE = lazy_compile(
    r"\b(?:my|the|our) (?:\w+ )?(?:address|email|phone|number|account|order number) (?:is|should be)\b"
    # "the card ending in 4417", "claim number CLM-448120"
    r"|\b(?:card|account|acct|policy|member(?:ship)?|customer|order|ticket|booking|confirmation|reference|"
    r"case|claim)(?: number| no\.?| id)?(?: ending in| is|:)? #?[a-z]*\d[\w-]{2,}\b"
)
# A short answer that is just a chosen value: "The 16th, same time if possible.", "Thursday at 9",
# "Size medium.", "$40 max".
_SLOT_ANSWER = lazy_compile(
    rf"^(?:the )?(?:\d{{1,2}}(?:st|nd|rd|th)|{DAY_NAMES}|"
    r"\d{1,2}(?::\d\d)?\s?(?:am|pm)|(?:size|colou?r|quantity|qty) \w+|[$€£]\s?\d[\d,.]*)(?:\b|$)"
)

# The value statements _statement_lb tries in this order, after the named things: (pattern,
# whether it reads the text as written (else lower-cased), the group it returns, the rule,
# the priority class)
_VALUE_STATEMENTS: tuple[tuple[LazyPattern, bool, int, str, str], ...] = (
    (_WORK_LIVE, True, 0, "affiliation", "entity"),
    (_ORG, True, 1, "organisation", "entity"),
    (_MONEY_CAP, False, 0, "budget", "constraint"),
    (_TECH_VERSION, True, 0, "environment", "constraint"),
    (_DAY_OF_MONTH_VALUE, False, 0, "day-of-month", "constraint"),
    (_DAY_MONTH_DATE, False, 0, "date", "constraint"),
    (_DECISION_STMT, False, 0, "decision", "decision"),
)


def _statement_lb(clean: str, norm: str) -> tuple[str, str, str] | None:
    """(rule, match, priority class) when a user statement carries an entity, constraint or decision."""
    m = _CONDITION.search(norm) if _CONDITION_GATE.search(norm) else None
    m = m or _PERSONAL_CONSTRAINT.search(norm)
    if m:
        return "personal-constraint", m.group(0), "constraint"
    for name, pat in (("named-relation", _NAMED_RELATION), ("named", _NAME_IS), ("named", _NAMED_ME)):
        for mm in pat.finditer(clean):
            name_txt = next(g for g in mm.groups() if g)
            if name_txt.split()[0] not in _STOP_CAPS:
                return name, mm.group(0), "entity"
    m = _HAVE_NAMED.search(clean)
    if m and m.group(1).split()[0] not in _STOP_CAPS:
        return "named", m.group(0), "entity"
    for pat, cased, group, rule, kind in _VALUE_STATEMENTS:
        m = pat.search(clean if cased else norm)
        if m:
            return rule, m.group(group), kind
    m = _ACCEPT.match(norm)
    if m:
        return "accept-option", m.group(0), "decision"
    m = _SLOT_ANSWER.match(norm)
    if m and len(_words(norm)) <= 7:
        return "slot-answer", m.group(0), "decision"
    found = _contact(norm)
    if found:
        return "contact-detail", found, "entity"
    found = _identifier(clean)
    if found:
        return "identifier", found, "entity"
    return None


def _first(a: tuple[int, str] | None, b: re.Match[str] | None) -> str | None:
    """Of ``a`` (its start, its text) and ``b``, the text that starts first; at the same start
    ``a``, as the one pattern's alternation tried it first."""
    if a is not None and (b is None or a[0] <= b.start()):
        return a[1]
    return b.group(0) if b is not None else None


def _contact(norm: str) -> str | None:
    """The first contact detail in ``norm``: an e-mail address or a phrase naming one."""
    email = _EMAIL.search(norm)
    return _first((email.start(1), email.group(1)) if email else None, _CONTACT_PHRASE.search(norm))


def _identifier(clean: str) -> str | None:
    """The first identifier in ``clean``, run by run of [\\w-] with a digit (time linear in its length)."""
    for run in _ID_RUN.finditer(clean):
        start, end = run.span()
        first = _ID_LETTER_START.search(clean, start, end)
        mixed = _ID_MIXED.match(clean, first.start()) if first else None
        found = _first((mixed.start(), mixed.group(0)) if mixed else None, _ID_CODE.search(clean, start, end))
        if found:
            return found
    return None


# The markers that open a decision ("Booked: ..."), one list for the rule and for what a bare
# acknowledgement may hold: a marker added to one and not the other would pin "Xed." again.
_DECISION_MARKERS = (r"booked|reserved|confirmed|decision(?: recorded)?|decided|done|noted|"
                     r"updated|cancel+ed|rescheduled|scheduled|reminder set|added|set|got it")
# Assistant turns that record a decision, booking or changed setting the user will rely on.
_ASSISTANT_DECISION = lazy_compile(
    # "Booked: ...", "Thanks. Done, I moved ...": a decision marker opening the turn or its 2nd sentence
    rf"^(?:[\w ,!.]{{0,25}}?[.,!] )?(?:{_DECISION_MARKERS})\b[:,]?"
    r"|\b(?:confirmed|booked|reserved|scheduled|rescheduled) (?:for|on|at)\b|\b(?:rescheduled|moved) to\b"
    r"|^\w+ (?:placed|confirmed|booked|scheduled|reserved|cancel+ed|submitted|filed)\b"
    r"|\bi(?:'ve| have)? (?:booked|reserved|confirmed|updated|changed|moved|rescheduled|assigned|reinstated|"
    r"cancel+ed|flagged|set|escalat\w+|added \w+(?: \w+)? to your)\b"
    r"|\b(?:i'm|i am) escalating\b"
    r"|\byour (?:reservation|booking|appointment|flight|order|plan|subscription)\b.{0,30}?"
    r"\b(?:is|has been) (?:now|moved|changed)\b"
    r"|\b(?:we'll|we will|i'll|i will) (?:use|go with|avoid|refund|stick with)\b"
)
# What an assistant acknowledgement may hold and still confirm nothing: the rule's own markers
# and verbs, thanks and assent, words pointing back ("it", "that", "for you", "the update") and
# bare numbers ("Noted 4." numbers a note, it states no value; "for 2" keeps its "for": content).
# A turn of these alone ("Noted.", "Done!", "Got it, thanks.", "All set, booked!") repeats the
# user's turn before it without its content: pinned, it would spend the pinned share on a line
# that says nothing and move the pin version for nothing. The turn that holds what was
# confirmed is the user's (their request, their fact), which the reply cannot stand in for.
_ACK_FILLER = lazy_compile(
    rf"\b(?:{_DECISION_MARKERS}|changed|moved|assigned|reinstated|flagged|"
    r"escalat\w+|placed|submitted|filed|use|go with|avoid|refund|stick with|"
    # the longer forms first: "i" would take the head of "i've" and leave "ve"
    r"i've|i have|i'm|i am|i'll|i will|i|we'll|we will|we|it|that|this|these|those|for you|all set|"
    r"thank you|thanks|thx|so much|very much|ok|okay|sure(?: thing)?|will do|no problem|no worries|"
    r"of course|perfect|great|alright|all right|understood|cheers|yes|yep|now|just|and|"
    # what any acknowledgement says of the user's turn, naming nothing in it
    r"(?:for )?the update|for letting me know|(?:in |to )?my notes)\b"
    # a bare number, not part of a time ("3:30"), a phone number ("555-0123"), an amount
    # ("$40", "50%"), a quantity with a unit ("10mg") or an identifier ("#4417")
    r"|(?<![\w:/$€£¥#+-])\d[\d,.]*(?![\w:/%-])"
)
# Anything left that is a letter or digit (any script) is content the acknowledgement confirms.
_CONTENT = lazy_compile(r"[^\W_]")


def _bare_acknowledgement(norm: str) -> bool:
    """Whether an assistant turn is only a marker, fillers, numbers and punctuation."""
    return _CONTENT.search(_ACK_FILLER.sub(" ", norm)) is None


# --------------------------------------------------------------------------------------------------
# Chitchat versus statement
# --------------------------------------------------------------------------------------------------

_SOCIAL = lazy_compile(
    r"\b(?:hi|hello|hey|thanks|thank you|thx|ty|appreciate(?:d)?|welcome|congrats|congratulations|wow|woah|"
    r"ugh|oof|yikes|what a|good catch|makes sense|fair enough|gotcha|i see|oh well|cheers|"
    r"good (?:evening|afternoon|day)|have a (?:good|great|nice|lovely)|"
    r"awesome|amazing|great|cool|nice|sweet|perfect|lovely|wonderful|fantastic|incredible|inspiring|proud|"
    r"glad|happy for you|sorry to hear|bye|goodbye|good night|good morning|good luck|take care|see ya|"
    r"see you|lol|haha+|hehe|lmao|ok|okay|k|got it|sounds good|will do|no worries|no problem|np|agreed?|"
    r"i agree|yeah|yep|sure thing|right on|way to go|keep it up|keep going|you got this|you're (?:so|really)|"
    r"good (?:call|job|work|point)|nice (?:work|job)|lgtm|interesting|hmm+|nope|that's it|that's all|"
    r"i understand|i bet|i believe|i can imagine|i can see why|looking forward|can't wait|means a lot|"
    r"life|journey|memories|support|courage|inspired?)\b"
)
# Regular past tense, minus common words that merely end in "ed".
_PAST = (
    r"(?!(?:need|indeed|speed|seed|feed|breed|bleed|proceed|exceed|succeed|red|bed|shed|wed)\b)[a-z]{2,}ed"
)
_FACT = lazy_compile(
    rf"\b(?:i|we|my|our|he|she|they|it|the|this|that|your|you|there)\b[^.!?]{{0,40}}?\b(?:{_PAST}|"
    r"went|got|made|took|had|has|have|did|began|started|starting|planning|working|bought|found|met|saw|"
    r"gave|ran|wrote|built|ordered|finished|joined|moved|visited|chose|painted|printed|using|use|"
    r"is|are|was|were)\b"
    rf"|\b(?:yesterday|last (?:week|month|year|night|{DAY_NAMES})|this (?:morning|weekend|week|month)|since|ago"
    r"|tomorrow|next (?:week|month|year)|currently|recently)\b"
    r"|\d"
)
_FACT_WEAK_VERBS = lazy_compile(
    r"\b(?:is|are|was|were|it's|that's)\b\s+(?:so |really |very |such |just )?(?:great|awesome|amazing|cool|"
    r"inspiring|incredible|tough|hard|important|nice|lovely|wonderful|cute|sweet|fun|rewarding|right)\b"
)


# First person + an event/state verb, outside a conditional or relative clause ("if we need help",
# "what I achieved" are not reports).
_FIRST_PERSON_FACT = lazy_compile(
    r"(?<!\bif )(?<!\bwhen )(?<!\bwhat )(?<!\bwhenever )"
    rf"\b(?:i|we)(?:'ve| have| had|'m| am| was)? (?:\w+ )?(?:{_PAST}|went|got|gotten|been|made|took|started|"
    r"starting|planning|working|bought|found|met|saw|gave|wrote|built|finished|joined|moved|visited|chose|"
    r"painted|printed|using|have|has|getting|going to|gonna|doing|teaching|learning|trying)\b"
)


_OPINION_LEAD = lazy_compile(r"i (?:bet|believe|agree|understand|can|hope|wish|guess)\b")


def _chitchat_or_statement(norm: str, role: str) -> tuple[str, str]:
    """Decide between chitchat and statement by weighing social cues against factual content."""
    words = _words(norm)
    courtesy = _COURTESY.fullmatch(norm)
    if courtesy is not None:
        # the whole turn a courtesy formula ("no need to thank me"): small talk; a lead that
        # is small talk itself ("no worries, ...", "hey, ...") names it, as before the lead
        # was read here
        social_lead = _SOCIAL.search(courtesy.group("lead") or "")
        if social_lead is not None:
            return "chitchat", f"rule:social '{social_lead.group(0)}'"
        return "chitchat", f"rule:courtesy '{norm.rstrip(' .!')}'"
    social = [m.group(0) for m in _SOCIAL.finditer(norm)]
    facts = [m.group(0) for m in _FACT.finditer(norm)]
    # Praise-shaped clauses ("it's so cute", "that's awesome") are social even though they have a verb.
    weak = len(_FACT_WEAK_VERBS.findall(norm))
    fact_n = max(0, len(facts) - weak)
    if not words:
        return "chitchat", "rule:empty"
    if len(words) <= 4 and social and not any(ch.isdigit() for ch in norm):
        return "chitchat", f"rule:social-short '{social[0]}'"
    if role == "assistant" and not social:
        return "statement", "rule:assistant-default"
    first_person_fact = _FIRST_PERSON_FACT.search(norm)
    if first_person_fact and not _OPINION_LEAD.match(first_person_fact.group(0)):
        return "statement", f"rule:first-person-fact '{first_person_fact.group(0)}'"
    if fact_n >= 2 and fact_n > len(social):
        return "statement", f"rule:factual '{facts[0]}'"
    if social:
        return "chitchat", f"rule:social '{social[0]}'"
    if fact_n:
        return "statement", f"rule:factual '{facts[0]}'"
    return "", ""


# --------------------------------------------------------------------------------------------------
# Embedding prototypes (fallback)
# --------------------------------------------------------------------------------------------------

# A few general sentences per intent.  They are only consulted when no rule fires, so they cover
# the shapes rules miss: elliptical answers, indirect requests, plain facts without cue words.
PROTOTYPES: dict[str, tuple[str, ...]] = {
    # Topic-neutral on purpose: MiniLM-style embeddings cluster by topic first, so a prototype with
    # a topical word ("time", "flight") attracts unrelated turns about that topic.
    "question": (
        "Do you know if that is possible?",
        "Which one would you recommend?",
        "How does that work exactly",
        "Is that right, or did I misunderstand",
        "I was wondering what the answer is",
    ),
    "correction": (
        "Actually, make it the other one instead.",
        "Sorry, I got that wrong earlier, it is different.",
        "Forget what I said before about that.",
        "That is no longer true.",
        "Change it back to what it was.",
    ),
    "instruction": (
        "Please take care of that for me.",
        "Only do it if it fits my constraints.",
        "Keep your answers short from now on.",
        "Go ahead and set it up.",
        "Sometime after that, but not before.",
    ),
    "chitchat": (
        "Thanks so much, that's great!",
        "Haha, that's awesome.",
        "Good morning, hope you're well.",
        "You're doing amazing, keep it up!",
        "Sounds lovely, enjoy it!",
        "Okay, cool.",
    ),
    "statement": (
        "I did that with my family last weekend.",
        "It was broken for a while yesterday.",
        "I'm based somewhere else these days.",
        "There are three parts and a summary.",
        "I've been learning something new.",
        "It runs on the older version.",
    ),
}


class _Prototypes:
    """Prototype embeddings computed once, on first use, from the embedder the classifier was given."""

    def __init__(self, embedder: object) -> None:
        self._embedder = embedder
        self._lock = threading.Lock()
        self._matrix: np.ndarray | None = None
        self._labels: list[str] = []

    def _ensure(self) -> tuple[np.ndarray, list[str]]:
        if self._matrix is None:
            with self._lock:
                if self._matrix is None:
                    labels = [lab for lab, sents in PROTOTYPES.items() for _ in sents]
                    texts = [s for sents in PROTOTYPES.values() for s in sents]
                    mat = np.asarray(self._embed(texts), dtype=np.float32)
                    self._labels = labels
                    self._matrix = _l2(mat)
        assert self._matrix is not None
        return self._matrix, self._labels

    def _embed(self, texts: list[str]) -> np.ndarray:
        embed = getattr(self._embedder, "embed", None)
        if embed is None:
            raise TypeError("embedder must have an .embed(list[str]) -> np.ndarray method")
        return np.asarray(embed(texts), dtype=np.float32)

    def embed_one(self, text: str) -> np.ndarray:
        return _l2(self._embed([text]))[0]

    def scores(self, vec: np.ndarray) -> dict[str, float]:
        """Best cosine similarity per label."""
        mat, labels = self._ensure()
        v = _l2(np.asarray(vec, dtype=np.float32).reshape(1, -1))[0]
        if v.shape[0] != mat.shape[1]:
            raise ValueError(f"embedding has dimension {v.shape[0]}, prototypes have {mat.shape[1]}")
        sims = row_dots(mat, v)
        # Score a label by its best prototype: labels are multi-modal, a mean would blur them.
        best: dict[str, float] = {}
        for lab, s in zip(labels, sims.tolist(), strict=True):
            if s > best.get(lab, -2.0):
                best[lab] = s
        return best


def _l2(mat: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(mat, axis=-1, keepdims=True)
    return np.asarray(mat / np.maximum(norms, 1e-12), dtype=np.float32)


# --------------------------------------------------------------------------------------------------
# The classifier
# --------------------------------------------------------------------------------------------------


class TurnClassifier:
    """Label turns with an intent, a load-bearing flag and a pin priority.

    ``embedder`` is optional; anything with ``.embed(list[str]) -> np.ndarray`` (float32, one
    L2-normalised row per text) works.  It is used only as a fallback when no rule fires, and a
    caller that already holds the turn's embedding passes it as ``embedding=`` so nothing is
    embedded twice.  Instances are thread-safe (the only state is the lazily built prototype matrix).
    """

    def __init__(
        self,
        embedder: object | None = None,
        *,
        min_prototype_similarity: float = 0.45,
        prototype_margin: float = 0.08,
    ) -> None:
        self._protos = _Prototypes(embedder) if embedder is not None else None
        self._min_sim = min_prototype_similarity
        self._margin = prototype_margin

    def classify(self, text: str, role: str, *, embedding: np.ndarray | None = None,
                 ordinary: bool = False) -> TurnLabel:
        """The label of one turn, from its first CLASSIFY_MAX_CHARS characters. With
        `ordinary`, the label it has as an ordinary turn: no correction cue read, and no
        "correction" prototype (supersession relabels so a correction that revised
        nothing: consolidation.supersede `_demote`)."""
        if role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {role!r}")
        text = text[:CLASSIFY_MAX_CHARS]
        if self._protos is not None or ordinary:
            # the fallback may embed: not a function of the text alone; an ordinary label
            # is asked for rarely (a correction that revised nothing): not remembered
            return self._classify(text, role, embedding, ordinary=ordinary)
        key = (text, role)
        hit = _label_memo.get(key, None)
        if hit is None:
            hit = self._classify(text, role, None)
            _remember(_label_memo, key, hit)
        return hit

    def _classify(self, text: str, role: str, embedding: np.ndarray | None, *, ordinary: bool = False
                  ) -> TurnLabel:
        if role == "tool":
            return TurnLabel("tool_result", False, PRIORITY["tool_result"], "rule:role-tool")
        if role == "system":
            return TurnLabel("instruction", True, PRIORITY["system"], "rule:role-system")
        clean = _clean(text)
        norm = clean.lower()
        if not norm:
            return TurnLabel("chitchat", False, 0, "rule:empty")
        clauses = _clauses(norm)

        corr = None if ordinary else correction_cue(norm, role, clauses=clauses)
        if corr is not None:
            reason = f"rule:correction-{corr[0]} '{corr[1]}'"
            return TurnLabel("correction", True, PRIORITY["correction"], reason)

        instr = _instruction_cue(norm, clauses, role)
        if instr is not None:
            rule, match, persistent = instr
            lb_stmt = _statement_lb(clean, norm)
            if persistent:
                prio = PRIORITY["constraint"]
            elif rule in ("decision", "go-ahead"):
                prio = PRIORITY["decision"]
            elif lb_stmt is not None:
                prio = PRIORITY[lb_stmt[2]]
            else:
                prio = PRIORITY["task"]
            return TurnLabel("instruction", True, prio, f"rule:{rule} '{match}'")

        q = _question_cue(norm, clauses)
        if q is not None and q[0] != "phatic-question":
            lb = _statement_lb(clean, norm) if role == "user" else None
            reason = f"rule:{q[0]} '{q[1]}'"
            if lb is not None:
                return TurnLabel("question", True, PRIORITY[lb[2]], f"{reason}; lb:{lb[0]} '{lb[1]}'")
            return TurnLabel("question", False, PRIORITY["question"], reason)
        body = norm
        if q is not None:
            # "What's up? Long time no see! I just contacted my mentor ...": the phatic question
            # is chitchat, but the rest of the turn may still state something.
            body = _Q_SENTENCE.sub(" ", norm).strip()
            if len(_words(body)) < 3:
                return TurnLabel("chitchat", False, PRIORITY["chitchat"], f"rule:{q[0]} '{q[1]}'")

        if role == "assistant":
            m = _ASSISTANT_DECISION.search(norm)
            # a bare acknowledgement names nothing a pin could carry: the assistant default decides
            if m and not _bare_acknowledgement(norm):
                reason = f"rule:assistant-decision '{m.group(0).strip()}'"
                return TurnLabel("statement", True, PRIORITY["decision"], reason)

        if role == "user":
            lb = _statement_lb(clean, norm)
            if lb is not None:
                return TurnLabel("statement", True, PRIORITY[lb[2]], f"rule:{lb[0]} '{lb[1]}'")

        intent, reason = _chitchat_or_statement(body, role)
        if q is not None and intent != "statement":
            return TurnLabel("chitchat", False, PRIORITY["chitchat"], f"rule:{q[0]} '{q[1]}'")
        if intent:
            prio = PRIORITY[intent]
            return TurnLabel(intent, False, prio, reason)

        # No rule fired: nearest prototype if we can embed, else the safe default.
        if self._protos is not None:
            vec = embedding if embedding is not None else self._protos.embed_one(text)
            best = self._protos.scores(vec)
            if ordinary:
                best.pop("correction", None)
            lab = max(best, key=lambda k: best[k])
            sim = best[lab]
            # Sentence embeddings encode topic more than speech act ("I'm in the Pacific time zone"
            # sits near "What time does it start?"), so a prototype only overrides the statement
            # default when it is both close and clearly closer than the statement prototypes.
            clear = sim >= self._min_sim and sim - best.get("statement", -1.0) >= self._margin
            if lab == "statement" or clear:
                lb_p = role == "user" and lab in ("instruction", "correction")
                prio = PRIORITY["task"] if lab == "instruction" and lb_p else PRIORITY[lab]
                return TurnLabel(lab, lb_p, prio, f"prototype:{lab} sim={sim:.2f}")
            weak = f"rule:default-statement (prototype:{lab} sim={sim:.2f} too weak)"
            return TurnLabel("statement", False, PRIORITY["statement"], weak)
        return TurnLabel("statement", False, PRIORITY["statement"], "rule:default-statement")
