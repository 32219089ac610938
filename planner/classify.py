"""Query classification: what kind of turn is this, and so which slices matter.

Classes: recent_recall ("what did I just say?"), targeted_recall ("where did we land on
the airline?"), temporal ("when did ...", "last week"), summarize ("recap the thread"),
new_subtask (a fresh request that needs little history), default.

Rules fire first and say which one fired. When none fires, embedding prototypes
(a few example queries per class, embedded once) decide if one is close enough;
otherwise the class is `default`. Both rule tables and prototypes are data, so a
deployment can extend them without touching the planner.

Talk in the flow of a chat is not recall: a question put to the other party ("How have
you been?"), a question that follows a remark in the same message ("Love that color! For
walking or running?") and one that opens with a greeting or an interjection ("Hey, how's
it going?") are `default` (narrow retrieval) unless they carry a recall cue or ask what
held before. A time named outside a message's question ("Got back yesterday! Anything
new?") does not make it temporal: only the sentences that ask are read for one.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

import numpy as np

from tiermem.tiers.vectors import row_dots


@dataclass(frozen=True)
class QueryClass:
    name: str
    reason: str
    # talk about what was just said (a follow-up, a greeting): the recent tail answers it,
    # so it retrieves nothing (planner.build)
    tail_answers: bool = False


_RULES: list[tuple[str, str, re.Pattern[str]]] = [
    ("recent_recall", "rule:just-said", re.compile(
        r"\b(what (did|have) (i|you|we) (just|only just) (say|said|ask|asked|tell|told|write|wrote|mention)"
        r"|(just|a moment|a minute|a second) ago|my (last|previous) (message|question|point)"
        r"|your (last|previous) (message|answer|reply)|repeat (that|what (i|you) said)|say that again"
        r"|what was (the|my|your) last (thing|message|question))\b")),
    ("summarize", "rule:summarize", re.compile(
        r"\b(summari[sz]e|summary|recap|tl;?dr|sum up|overview of (our|this|the) (conversation|chat|thread|discussion)"
        r"|what have we (discussed|covered|talked about)|catch me up)\b")),
    ("temporal", "rule:when", re.compile(
        r"(^|\b)(when (did|was|were|is|will|do|does|had|have)|what (date|day|time|year|month)|how long (ago|since)"
        r"|which (day|date|year|month|week)|since when|how many (days|weeks|months|years))\b")),
    ("temporal", "rule:time-reference", re.compile(
        # a time ahead ("next month") names no period of the log: not here (what it
        # asks about is found as any other question's, by the rules below)
        r"\b(yesterday|last (week|month|year|weekend|night|time)|this (week|month|year|weekend)"
        r"|(in|on|during|before|after) (january|february|march|april|may|june|july|august|september|october"
        r"|november|december|\d{4})|\d+ (days|weeks|months|years) ago)\b")),
    ("targeted_recall", "rule:recall-cue", re.compile(
        r"\b(where did we (land|end up|leave)|what did (we|i|you) (decide|agree|choose|pick|say|settle|mention)"
        r"|do you remember|did (i|we|you) (mention|say|tell|decide|agree)|what was (the|that|our|my)"
        r"|earlier (you|i|we) (said|mentioned)|as (i|we) (said|discussed)|we (discussed|talked about)"
        r"|what('s| is| was) (my|our)\b|(i|we) (already |just |previously |earlier )?told you"
        # "the tracking link from before": a thing given earlier in the conversation
        r"|from (before|earlier)\b"
        # a thing given earlier, named by when or how it was given ("the same table as
        # before", "as last time", "order my usual coffee", "go back to what we decided",
        # "the one I gave you", "the format I described", "the options you listed"); "my
        # usual run" in a story asks for nothing, "order my usual" does
        r"|as (before|last time)\b|\bgo back to (what|the \w+ (i|we|you))\b"
        r"|\b(order|book|get|make|bring|send|reserve|give me|i'?ll have)\b[^.!?]*\b(my|our|the) usual\b"
        r"|(what|the ones?) (i|we|you) (gave (you|me|us)|decided|agreed|picked|chose|settled on|mentioned|suggested"
        r"|recommended|described|listed|proposed)\b"
        # ... with nothing after the verb but when or where: what it names is the thing
        # given ("I listed my flat" names what was listed, and is no reference)
        r"|\b((i|we|you) (described|listed|outlined|quoted)|(you|we) proposed)"
        r"(?=\s*($|[.,;:!?]|(earlier|before|above|yesterday|at (the start|first)|for|in|on|to (you|me))\b)))"
        # "remind me" as a request ("remind me what...", "can you remind me"), not as a
        # verb of a statement ("moments like these remind me of ...")
        r"|(^|[.!?,;:]\s*|\b(please|can you|could you|would you|will you)\s+)remind me\b"
        # an order to give back the asker's own facts ("Tell me my confirmation code.",
        # "Please confirm my seat preference."), at the start of a sentence or after please
        r"|(^|[.!?,;:]\s*|\bplease\s+)((tell|give|show|send|read) me (back )?|(list|repeat|confirm|read back) )"
        r"(my|our)\b")),
    ("new_subtask", "rule:new-task", re.compile(
        r"^(ok(ay)?|now|next|also|alright|new task|let'?s|can you|could you|please|help me|write|create|draft"
        r"|build|generate|implement|make)\b.*\b(new|now|next|start|another|different|fresh|write|create|draft"
        r"|build|generate|implement|make)\b")),
]
# Sentences shaped like a question that ask nothing: a "guess what ..." (the teller
# answers it next) and an exclamation ("What a photo!", "What an adventure!").
_ASKS_NOTHING = re.compile(r"^(guess (what|who|where|how|which|when)\b|what an? [^?]*!)")
_QUESTION = re.compile(r"\?\s*$|^(who|what|which|where|why|how|whose|whom|did|does|do|is|are|was|were|has|have|can)\b")
# Sentence ends: "!" or "?", or "." after a word of two letters or more that is no title,
# each followed by a space ("Dr. Seuss", "the U.S. coast", "e.g. this" stay one sentence).
_BREAK = re.compile(r"([.!?]+)\s+")
_PLAIN_WORD_END = re.compile(r"\b([A-Za-z][a-z]+|[0-9]+)\.+$")
_TITLES = frozenset({"mr", "mrs", "ms", "dr", "jr", "sr", "st", "prof", "rev", "gen", "col", "capt", "lt", "sgt",
                     "inc", "ltd", "co", "vs", "no", "vol", "fig", "ch"})
# A message that opens with a greeting or an interjection ("Hey, how's it going?",
# "Wow, did it work?") is talk in the flow of a chat, not a lookup.
_OPENER = re.compile(r"^(hey|hi|hello|wow|whoa|woah|oh|ooh|oof|aw+|yay|yeah|yep|yup|haha+|lol|cool|nice|great"
                     r"|awesome|sweet|thanks|thank you)\b")

_PROTOTYPES: dict[str, list[str]] = {
    "recent_recall": ["what did I just say?", "repeat your last answer", "what was my previous message?"],
    "targeted_recall": ["where did we land on the airline?", "what did we decide about the database?",
                        "remind me what my budget was", "what was the name of the hotel I mentioned?"],
    "temporal": ["when did I start the new job?", "what happened last week?", "how long ago did we talk about this?"],
    "summarize": ["summarize our conversation so far", "give me a recap of the thread"],
    "new_subtask": ["let's start something new: write a cover letter", "now help me draft an email to my landlord"],
}
PROTOTYPE_MIN_SIMILARITY = 0.62
# A question put to the other party about themselves, now ("How have you been?", "What
# made you pick it?", "Is this your own painting?"): conversation, answered from the
# recent tail, not a recall of the past; it brings back only clearly related turns (the
# `default` class), so the per-turn part stays small and the prefix caches. A question
# about what "you" said or did before ("did you mention", "what you suggested") is
# recall and stays one; the recall-cue rule above catches the common forms first.
_ASKS_YOU = re.compile(r"\b(you|your|yours|yourself)\b")
_YOU_BEFORE = re.compile(
    r"\bdid you (say|tell|suggest|recommend|mention|give|send|write|promise|ask|decide|agree|choose|pick|book"
    r"|plan|share|show|call|name)\b|\byou (said|told|suggested|recommended|mentioned|gave|sent|wrote|promised|asked"
    r"|decided|agreed|chose|picked|booked|planned|shared|showed|called|named|listed|proposed|described|quoted"
    r"|outlined|offered|explained|provided)\b|\byour (last|previous|earlier)\b"
    # what the asker said or did earlier ("what dates did I give you?", "which email did
    # we send you first?") is recall of the log, whoever it is put to
    r"|\bdid (i|we)\b|\b(i|we) (already |just |previously |earlier )?(said|told|gave|asked|mentioned|wrote|sent)\b"
    # what someone on the other side said or did ("What did your colleague promise me?")
    r"|\bdid your [a-z]+ (say|tell|promise|offer|quote|send|give|agree|decide|mention)\b")
# What "you" should do for the asker ("What should you call me?", "Which flights should you
# avoid for me?") asks for the asker's standing orders: recall of the log, not talk about
# the other party now (evals.pressure's probes lost retention to 0.90 when these were
# taken for conversation). Both an obligation put to "you" and the asker as its object.
_YOU_SHOULD = re.compile(r"\b(should|must|shall) you\b|\byou (should|must|shall|ought to|need to|have to"
                         r"|are supposed to|are meant to)\b")
# What "you" hold of the asker ("What phone number do you have for me?", "Do you know my
# name?", "Which address is on file for us?") asks for a value the asker gave: recall of
# the log. With the asker named too; "What do you have planned for us?" is talk, now.
_YOU_HOLD = re.compile(
    r"\b(?:what|which)\b(?: \w+){0,3} (?:do|did|does) you (?:still |currently )?(?:have|hold|keep|know|store|got)\b"
    r"(?! (?:planned|in mind|going on|on your))"
    r"|\b(?:do|did) you (?:still |currently )?(?:have|hold|keep|know|store) (?:my|our)\b|\bon (?:file|record)\b")
_ASKER = re.compile(r"\b(me|my|mine|us|our|ours)\b")
# A polite request to look something up ("Can you tell me my flight number?", "Could you
# tell me which hotel I picked?", "Which hotel are we staying at, can you check?") puts
# "you" to work on the asker's own facts: recall. The asker must own what is asked (my,
# our, I, we); "Could you tell me a joke?" and "Can you show me a picture of it?" point to
# nothing the asker said and stay talk.
_YOU_REQUEST = re.compile(
    r"\b(?:can|could|would|will) you (?:please |just |quickly |now )?(?:tell|give|repeat|confirm|list|check"
    r"|look up|find|pull up|show|send|read|recap|say)\b")
_ASKER_OWNS = re.compile(r"\b(my|our|mine|ours|i|we)\b")
# An order or a question that points back at a thing of the log by how it was given or
# used ("Send the draft to the same people as yesterday.", "Use the gift budget I set for
# my nephew.", "Apply the same fix you did for the login bug.", "Can you rebook the
# restaurant we liked in Porto?"): recall. Read only in a message that orders or asks; in
# a story "the cake we made" points at nothing the agent must find.
_BACK_REF = re.compile(
    r"\b(?:the|those|my|our) (?:same )?(?:[a-z]+ ){1,2}(?:i|we|you) (?:already |just |usually )?"
    r"(?:[a-z]+ed|set|use|did|made|put|chose|agreed on|gave you|told you about|sent|bought|paid|wrote|built|ran)\b"
    r"|\bsame (?:[a-z]+ ){1,2}as (?:yesterday|last (?:time|week|month)|before)\b")
_ORDER_START = re.compile(
    r"^(?:(?:ok(?:ay)?|now|and|also|hey|hi)[,!]?\s+)?(?:please |just )?(?:send|use|put|apply|run|book|rebook|order"
    r"|pay|ship|charge|add|call|email|text|schedule|reuse|repeat|redo|do|make|set|get|bring|forward|reply|move"
    r"|copy|pick|pull up|open|deploy|restore|reinstall|cancel|renew)\b")
# Asking whether the other remembers is recall, read in the sentences that ask (in a
# remark, "remember why I do it" and "these remind us of" are not).
_RECALL_VERB = re.compile(r"\b(remember|recall|remind)\b")
# A question about what held before a change: "what was my budget before?", "which
# airline did we pick at first?", "what did I first say about ...", "what did I use to".
_PAST = re.compile(
    r"\b(?:originally|at first|initially|at the start|in the beginning|previously|used to|use to|"
    r"(?:first|earlier) (?:said|say|gave|give|asked|ask|picked|pick|booked|book|chose|planned|told|mentioned|wanted)"
    r"|before (?:i|we|you|it|they|he|she|that|the \w+) (?:changed|moved|switched|updated|corrected|was|were|got)"
    r"|(?:was|were|did|had)\b[^?]*\bbefore\b(?:\s*\??$| it| that| the change)"
    r"|old (?:value|address|number|plan|budget|name|date|time))"
)


def sentences(text: str) -> list[str]:
    """The sentences of a message, in order (blank ones left out)."""
    text = text.strip()
    out: list[str] = []
    start = 0
    for m in _BREAK.finditer(text):
        seg = text[start:m.end(1)]
        word = _PLAIN_WORD_END.search(seg)
        if "!" in m.group(1) or "?" in m.group(1) or (word and word.group(1).lower() not in _TITLES):
            out.append(seg.strip())
            start = m.end()
    out.append(text[start:].strip())
    return [x for x in out if x]


def question_text(query: str | None) -> str:
    """The part of a message that asks: its sentences that end with "?" (a message with
    none that reads as a question, "who wrote it", is all question), else "". A sentence
    that only sounds like one asks nothing (`_ASKS_NOTHING`: "Guess what I did this week?"
    is answered by the teller, "What a photo!" exclaims)."""
    if not query or not query.strip():
        return ""
    parts = sentences(query)
    asked = [x for x in parts if x.endswith("?") and not _ASKS_NOTHING.match(x.lower())]
    if asked:
        return " ".join(asked)
    if any(x.endswith("?") for x in parts) or _ASKS_NOTHING.match(query.strip().lower()):
        return ""
    return query.strip() if _QUESTION.search(query.strip().lower()) else ""


def follows_up(query: str) -> bool:
    """Whether the message asks only after saying something first ("Love that color! For
    walking or running?", "Sounds fun. Did they have a good time?"): a reaction to, or a
    remark on, what was just said, and a question about it, which the recent tail answers."""
    parts = sentences(query)
    first = next((i for i, x in enumerate(parts) if x.endswith("?")), None)
    return first is not None and first > 0 and any(re.search(r"\w", x) for x in parts[:first])


def tells_only(query: str | None) -> bool:
    """Whether a message asks nothing and points to nothing said before ("I went hiking
    yesterday, it was lovely.", "Let's draft the cover letter now."): the recent tail and
    the stable layers (pins, summary) carry what it needs, so it retrieves nothing. A
    message that says "I told you", "as we discussed", "I mentioned", or names an earlier
    value points back, and keeps its narrow retrieval."""
    if not query or not query.strip():
        return False
    q = query.strip().lower()
    return not question_text(query) and not _YOU_BEFORE.search(q) and not _RECALL_VERB.search(q) \
        and not about_past(q) and not any(p.search(q) for n, _r, p in _RULES if n == "targeted_recall")


def about_past(query: str | None) -> str | None:
    """The cue when `query` asks what held before a change (superseded values then answer
    it, shown with their validity), else None."""
    if not query:
        return None
    m = _PAST.search(query.lower())
    return m.group(0) if m else None


class QueryClassifier:
    """Rules, then prototypes. `embed` is any callable from texts to normalized vectors."""

    def __init__(self, prototypes: dict[str, list[str]] | None = None) -> None:
        self.prototypes = prototypes or _PROTOTYPES
        self._proto: tuple[list[str], np.ndarray] | None = None
        self._lock = threading.Lock()

    def _prototype_matrix(self, embed: object) -> tuple[list[str], np.ndarray]:
        with self._lock:
            if self._proto is None:
                labels = [c for c, texts in self.prototypes.items() for _ in texts]
                texts = [t for ts in self.prototypes.values() for t in ts]
                self._proto = (labels, embed(texts))  # type: ignore[operator]
            return self._proto

    def classify(self, query: str | None, *, query_vec: np.ndarray | None = None,
                 embed: object | None = None) -> QueryClass:
        if not query or not query.strip():
            return QueryClass("recent_recall", "rule:no-query (continue from the tail)")
        q = query.strip().lower()
        asks = bool(_QUESTION.search(q)) and not _ASKS_NOTHING.match(q)
        asked = question_text(query).lower()  # the sentences that ask
        for name, rule, pattern in _RULES:
            # "I went there yesterday" tells, it does not ask: a time named outside the
            # message's question ("Got back yesterday! Anything new with you?") needs the
            # turns of that time only if they are clearly related (what every default
            # turn retrieves), not a broad recall
            m = pattern.search(asked if rule == "rule:time-reference" else q)
            if m and rule == "rule:recall-cue" and m.group(0).startswith("what was") and follows_up(query):
                # "Sounds fun! What was the best part?": a question about what was just
                # said, after a remark on it (the follow-up rule below), not a lookup
                m = None
            if m:
                return QueryClass(name, f"{rule} '{m.group(0).strip()}'")
        if (asks or _ORDER_START.search(q)) and (m := _BACK_REF.search(asked or q)):
            return QueryClass("targeted_recall", f"rule:back-reference '{m.group(0)}'")
        if asks and not _YOU_BEFORE.search(q) and not _RECALL_VERB.search(asked or q) and not about_past(q):
            you = asked or q
            for_asker = ((_YOU_SHOULD.search(you) or _YOU_HOLD.search(you)) and _ASKER.search(you)) or \
                (_YOU_REQUEST.search(you) and _ASKER_OWNS.search(you))
            if _ASKS_YOU.search(you) and not for_asker:
                return QueryClass("default", "rule:asks-you (a question to the other party, now: the tail answers it)")
            if follows_up(query):
                return QueryClass("default", "rule:follow-up (a question after a remark, about what was just said: "
                                             "the tail answers it)", tail_answers=True)
            if _OPENER.search(q) and not for_asker:
                return QueryClass("default", "rule:chat-opener (a greeting or an interjection: talk in the flow "
                                             "of the chat, the tail answers it)", tail_answers=True)
        if query_vec is not None and embed is not None:
            labels, mat = self._prototype_matrix(embed)
            sims = row_dots(mat, query_vec.astype(np.float32))
            best = int(np.argmax(sims))
            if float(sims[best]) >= PROTOTYPE_MIN_SIMILARITY:
                return QueryClass(labels[best], f"prototype:{labels[best]} sim={float(sims[best]):.2f}")
        if asks:
            # a question that no rule placed is most often about something said before
            return QueryClass("targeted_recall", "rule:question")
        return QueryClass("default", "no rule or prototype matched")
