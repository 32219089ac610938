"""Supersession: which earlier turns does a correction or retraction replace?

``find_superseded`` is called with a new user turn and the earlier user turns of the same
conversation (most recent last).  It returns the positions the new turn supersedes, each with a
reason, and returns nothing unless the turn carries a correction or retraction cue *and* an earlier
turn plausibly matches.  Precision matters more than recall here: a wrong supersession unpins and
marks stale a constraint that is still live, which is worse than leaving an outdated one pinned.

Matching, in order of strength:

1. the old value named in the correction ("not Lisbon", "instead of Postgres") appears in a turn;
2. shared content words and entities ("Acme", "hotel", "budget"), entities weighted double;
3. a slot-style correction ("make it Wednesday") matches the most recent turn holding a value of
   the same slot type (weekday, time, date, money, number with its unit, place, size, e-mail,
   phone, language);
4. embedding similarity, when both sides have an embedding, breaks ties and can match alone
   above ``min_similarity``;
5. a bare retraction ("scratch that", "never mind") with nothing else to go on takes the
   immediately previous load-bearing or instruction turn.

Among equal scores the most recent turn wins, and load-bearing turns are preferred.
Only the single best turn is returned: one correction revises one earlier statement.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

import numpy as np

from consolidation.classify import correction_cue, normalize

__all__ = ["Candidate", "detect_slots", "find_superseded"]


@dataclass(frozen=True)
class Candidate:
    """An earlier user turn that a correction might supersede."""

    position: int
    text: str
    intent: str
    load_bearing: bool
    embedding: np.ndarray | None = None


# Turns that state nothing a correction could revise.
_NOT_SUPERSEDABLE = frozenset({"question", "chitchat", "tool_result"})

# --------------------------------------------------------------------------------------------------
# Cues
# --------------------------------------------------------------------------------------------------

# State changes that revise a fact without a correction word: "I moved to Seattle", "I joined Globex".
_STATE_CHANGE = re.compile(
    r"\b(?:i|we|she|he|they|it)(?:'ve| have)? (?:moved to|switched to|joined|left|quit|changed|started at|"
    r"now work|now live|got a new|no longer)\b|\b(?:changed|moved)\b.{0,30}\b(?:to|now)\b|\bmy new \w+ is\b"
)
_BARE_RETRACTION = re.compile(
    r"^(?:(?:hmm+|oh|ok(?:ay)?|wait|no|sorry|actually|um+)[,.!]?\s+)*"
    r"(?:scratch that|never ?mind|nvm|forget (?:it|that|what i (?:just )?said)|ignore (?:that|"
    r"my last (?:message|request))|"
    r"disregard (?:that|my last (?:message|request))|undo (?:that|it|the last (?:change|one)))"
    r"(?:[,.!]?\s*(?:please|sorry|thanks))?[,.!]*"
)
_RETRACTION_OPENER = re.compile(r"^(?:\w+[,.!]?\s+)?(?:scratch that|never ?mind)\b")
# The value being replaced, when the correction names it: "not Lisbon", "instead of Postgres",
# "forget about the hotel", "I don't work at Acme anymore".
# (Case-insensitive cue words, but the optional second word of the value must be capitalised:
# "Fly.io", "Harcourt Road", not "Acme anymore".)
_OLD_VALUE = re.compile(
    r"\b(?i:not|instead of|rather than|no longer|anymore at|about|forget(?: about)?(?: the)?|"
    r"(?:don't|do not|doesn't|does not|no longer) \w+ (?:at|for|in|with|on))"
    r"\s+(?i:the |a |an |my )?([\w:$.@'-]+(?: [A-Z][\w'-]+)?)"
)

# --------------------------------------------------------------------------------------------------
# Slot detectors
# --------------------------------------------------------------------------------------------------

_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december|"
    "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
_NUMBER_WORDS = (
    "one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|forty|fifty|hundred"
)
_LANGUAGES = (
    "english|french|spanish|german|italian|portuguese|dutch|russian|chinese|mandarin|cantonese|japanese|korean|"
    "arabic|hindi|turkish|polish|swedish|norwegian|danish|finnish|greek|hebrew|vietnamese|thai|indonesian"
)
_SLOT_PATTERNS: dict[str, re.Pattern[str]] = {
    "email": re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+"),
    "phone": re.compile(r"\b(?:\+?\d{1,3}[ -])?(?:\(?\d{3}\)?[ -])?\d{3}-\d{4}\b"),
    "money": re.compile(r"[$€£]\s?\d[\d,.]*|\b\d[\d,.]*\s?(?:dollars|euros|pounds|usd|eur|gbp|bucks)\b"),
    "time": re.compile(
        r"\b\d{1,2}(?::\d\d)?\s?(?:am|pm)\b|\b\d{1,2}:\d\d\b|\bnoon\b|\bmidnight\b"
        # "at 6", "by 10": a bare hour after a time preposition, unless a unit follows ("to 6 people")
        r"|\b(?:at|by|until) (?:[1-9]|1[0-2])\b(?![-/.:]\d|\s?(?:am|pm))"
        r"(?! (?:people|nights|days|km|miles|degrees|kids|guests|percent|%))"
    ),
    "date": re.compile(
        rf"\b(?:{_MONTHS})\.? \d{{1,2}}(?:st|nd|rd|th)?\b|\b\d{{1,2}}(?:st|nd|rd|th)\b"
        r"|\b\d{1,2}/\d{1,2}(?:/\d{2,4})?\b"
    ),
    "weekday": re.compile(
        r"\b(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|weekend|tomorrow|tonight)s?\b"
    ),
    "size": re.compile(
        r"\b(?:size (?:xs|s|m|l|xl|xxl|\d+)|extra[- ]small|extra[- ]large|small|medium|large|xs|xl|xxl)\b"
    ),
    "language": re.compile(rf"\b(?:{_LANGUAGES})\b"),
    "number": re.compile(rf"\b(?:\d+(?:\.\d+)?|{_NUMBER_WORDS})\b"),
}
# Place: a capitalised name after a locative preposition, or a street address.
# ("work at Acme" names an employer, not a place.)
_PLACE = re.compile(
    r"(?<!work )(?<!working )(?<!study )"
    r"\b(?:in|to|at|from|near|into|visit(?:ing)?|around)\s+((?:[A-Z][\w'-]+)(?:[ ,]+[A-Z][\w'-]+)*)"
    r"|\b\d+\s+[A-Z][\w'-]+\s+(?:Road|Rd|Street|St|Avenue|Ave|Lane|Ln|Boulevard|Blvd|Drive|Dr|Way|Place|Pl)\b"
)
_NOT_PLACE = re.compile(
    rf"^(?:the|a|an|my|our|i|it|monday|tuesday|wednesday|thursday|friday|saturday|sunday|"
    rf"{_MONTHS}|{_LANGUAGES})$",
    re.I,
)


def detect_slots(text: str) -> dict[str, set[str]]:
    """Typed values in ``text``: {"weekday": {"tuesday"}, "time": {"9am"}, "number": {"4 people"}, ...}.

    Numbers carry the following word as a unit ("4 people", "68 degrees") so that "make it 6 people"
    matches a party size rather than any number.  Values already claimed by a more specific slot
    (a time, a date, money) are not repeated as plain numbers.
    """
    return {k: set(v) for k, v in _slots(text).items()}


@functools.lru_cache(maxsize=4096)
def _slots(text: str) -> dict[str, frozenset[str]]:
    # Cached: the same earlier turns are scanned again for every new correction.
    low = normalize(text)
    found: dict[str, set[str]] = {}
    claimed: list[tuple[int, int]] = []
    for slot, pat in _SLOT_PATTERNS.items():
        for m in pat.finditer(low):
            if any(a <= m.start() < b or a < m.end() <= b for a, b in claimed):
                continue
            value = m.group(0).strip()
            if slot == "number":
                unit = re.match(r"\s*([a-z]{2,})", low[m.end() :])
                if unit and unit.group(1) not in _STOP:
                    value = f"{value} {unit.group(1)}"
            found.setdefault(slot, set()).add(value)
            claimed.append((m.start(), m.end()))
    for m in _PLACE.finditer(text):
        name = (m.group(1) or m.group(0)).strip(" ,")
        first = name.split()[0].strip(",")
        if not _NOT_PLACE.match(first):
            found.setdefault("place", set()).add(name.lower())
    return {k: frozenset(v) for k, v in found.items()}


def _unit(value: str) -> str:
    parts = value.split(" ", 1)
    return _stem(parts[1]) if len(parts) == 2 else ""


# --------------------------------------------------------------------------------------------------
# Lexical overlap
# --------------------------------------------------------------------------------------------------

# fmt: off
_STOP = frozenset(
    (
        "a", "an", "the", "and", "or", "but", "so", "if", "then", "than", "that", "this", "these", "those",
        "it", "its", "it's", "i", "i'm", "i've", "i'd", "i'll", "me", "my", "mine", "we", "we're", "our",
        "us", "you", "your", "yours", "he", "she", "him", "her", "his", "they", "them", "their", "is", "are",
        "was", "were", "be", "been", "being", "am", "do", "does", "did", "done", "have", "has", "had", "will",
        "would", "shall", "should", "can", "could", "may", "might", "must", "to", "of", "in", "on", "at",
        "for", "from", "by", "with", "without", "about", "into", "onto", "over", "under", "up", "down", "out",
        "off", "as", "just", "also", "too", "very", "really", "please", "thanks", "thank", "ok", "okay",
        "yes", "no", "not", "nope", "yeah", "hmm", "oh", "um", "wait", "sorry", "actually", "instead",
        "rather", "anymore", "longer", "never", "mind", "scratch", "forget", "ignore", "disregard", "undo",
        "meant", "mean", "said", "say", "tell", "told", "make", "made", "change", "changed", "switch",
        "moved", "move", "new", "now", "still", "after", "all", "what", "which", "who", "when", "where",
        "why", "how", "there", "here", "some", "any", "one", "want", "need", "like", "get", "got", "go",
        "going", "take", "put", "keep", "set", "add", "use", "using", "let", "let's", "lets", "don't", "dont",
        "doesn't", "isn't", "aren't", "can't", "won't", "wrong", "mistake", "correction", "back", "again",
        "fine", "better", "sure", "maybe", "only", "know", "think", "guess", "come", "came", "around", "last",
        "next", "week", "month", "year", "today", "tomorrow", "tonight",
    )
)
# fmt: on


def _stem(word: str) -> str:
    w = word.lower().strip("'")
    if w.endswith("'s"):
        w = w[:-2]
    for suf in ("ing", "ed", "es", "s"):
        if w.endswith(suf) and len(w) - len(suf) >= 3:
            w = w[: -len(suf)]
            if suf in ("ing", "ed") and len(w) >= 3 and w[-1] == w[-2]:
                w = w[:-1]  # cancelling -> cancel
            break
    return w


def _content(text: str) -> dict[str, float]:
    """Content-word stems with a weight: capitalised words inside a sentence (entities) count double.

    A sentence's first word is capitalised anyway, so it counts once; a name there still matches at
    full weight when the other side mentions it mid-sentence (the pair takes the larger weight).
    """
    return dict(_content_items(text))


@functools.lru_cache(maxsize=4096)
def _content_items(text: str) -> tuple[tuple[str, float], ...]:
    out: dict[str, float] = {}
    for sent in re.split(r"(?<=[.!?])\s+", text):
        for i, m in enumerate(re.finditer(r"[A-Za-z][\w'-]*", sent)):
            tok = m.group(0)
            low = tok.lower()
            if low in _STOP or len(low) < 3:
                continue
            w = 2.0 if tok[0].isupper() and i > 0 else 1.0
            st = _stem(low)
            out[st] = max(out.get(st, 0.0), w)
    return tuple(out.items())


def _old_values(text: str) -> set[str]:
    vals = set()
    for m in _OLD_VALUE.finditer(text):
        v = m.group(1).strip(" .,!")
        low = v.lower()
        if low in _STOP or len(low) < 2:
            continue
        vals.add(low)
    return vals


def _contains_value(candidate: str, value: str) -> bool:
    """Whole-token containment that treats "7:40" and "7:40pm" as the same value."""
    low = normalize(candidate)
    if re.search(r"(?<![\w])" + re.escape(value) + r"(?:am|pm|s)?(?![\w])", low):
        return True
    st = _stem(value)
    return len(st) >= 3 and st in {_stem(w) for w in re.findall(r"[\w'-]+", low)}


# --------------------------------------------------------------------------------------------------
# Matching
# --------------------------------------------------------------------------------------------------


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    na = float(np.linalg.norm(a))
    nb = float(np.linalg.norm(b))
    if na == 0.0 or nb == 0.0:
        return 0.0
    return float(np.dot(a.astype(np.float32).ravel(), b.astype(np.float32).ravel()) / (na * nb))


def find_superseded(
    text: str,
    candidates: Sequence[Candidate],
    *,
    embedding: np.ndarray | None = None,
    min_similarity: float = 0.6,
) -> list[tuple[int, str]]:
    """Positions of earlier turns that ``text`` corrects or retracts, each with the reason.

    ``candidates`` are the conversation's earlier user turns, most recent last.  Returns ``[]``
    when ``text`` has no correction or retraction cue, or when no candidate plausibly matches.
    """
    norm = normalize(text)
    cue = correction_cue(norm, "user")
    state = _STATE_CHANGE.search(norm)
    if cue is None and state is None:
        return []
    cue_txt = cue[1] if cue else state.group(0) if state else ""
    eligible = [c for c in candidates if c.intent not in _NOT_SUPERSEDABLE]
    if not eligible:
        return []

    # A bare "scratch that" / "never mind" refers to whatever was just asked for.
    if _BARE_RETRACTION.fullmatch(norm):
        for c in reversed(eligible):
            if c.load_bearing or c.intent in ("instruction", "correction"):
                return [(c.position, f"retraction:bare '{cue_txt}' -> previous load-bearing turn")]
        return []

    old_vals = _old_values(text)
    words = _content(text)
    for v in old_vals:  # the old value is evidence about the target, not content of the new value
        words.pop(_stem(v), None)
    slots = _slots(text)
    # A correction that names the value it replaces ("I don't work at Acme anymore") while no
    # earlier turn holds that value is about something out of view: a single shared word or a
    # slot type is then too weak to pin it on another turn.
    orphan = bool(old_vals) and not any(_contains_value(c.text, v) for c in eligible for v in old_vals)

    best: tuple[float, int, int, str] | None = None  # (score, lb, position, reason)
    for c in eligible:
        why: list[str] = []
        hit_old = [v for v in old_vals if _contains_value(c.text, v)]
        old_score = 3.0 if hit_old else 0.0
        if hit_old:
            why.append(f"old value '{hit_old[0]}'")
        cw = _content(c.text)
        shared = sorted(set(words) & set(cw))
        lex_score = sum(max(words[w], cw[w]) for w in shared)
        if shared:
            why.append("shared " + ",".join(f"'{w}'" for w in shared[:3]))
        same = _matching_slots(slots, _slots(c.text))
        slot_score = 1.0 if same else 0.0
        if same:
            why.append("slot " + "/".join(same))
        sim_score = 0.0
        if embedding is not None and c.embedding is not None:
            sim = _cosine(embedding, c.embedding)
            if sim >= min_similarity:
                sim_score = 1.0 + sim
                why.append(f"sim={sim:.2f}")
        score = old_score + lex_score + slot_score + sim_score
        strong = old_score > 0 or sim_score > 0 or lex_score >= 2.0
        if score < 1.0:
            continue
        if orphan and not strong:
            # The correction names a value no earlier turn holds ("I don't work at Acme anymore"
            # with no Acme in view): one shared word or a slot type is too weak to pin it elsewhere.
            continue
        if not strong and not shared and not c.load_bearing:
            # A bare slot match ("make it Wednesday") only revises a turn worth pinning, not any
            # turn that happens to mention a day.
            continue
        # Tie-break: load-bearing first, then recency (later position wins).
        key = (score + (0.25 if c.load_bearing else 0.0), int(c.load_bearing), c.position)
        if best is None or key > best[:3]:
            best = (*key, f"correction '{cue_txt}': " + "; ".join(why))

    if best is not None:
        return [(best[2], best[3])]

    # "scratch that, keep the old name": a retraction opener whose object matched nothing.
    if cue is not None and cue[0] == "retraction" and _RETRACTION_OPENER.match(norm):
        for c in reversed(eligible):
            if c.load_bearing or c.intent in ("instruction", "correction"):
                return [(c.position, f"retraction:'{cue_txt}' -> previous load-bearing turn")]
    return []


def _matching_slots(new: Mapping[str, AbstractSet[str]], old: Mapping[str, AbstractSet[str]]) -> list[str]:
    """Slot types present in both; numbers only match when their units agree (or one side has none)."""
    same: list[str] = []
    for slot in new.keys() & old.keys():
        if slot == "number":
            new_units = {_unit(v) for v in new[slot]}
            old_units = {_unit(v) for v in old[slot]}
            if not (new_units & old_units) and "" not in new_units and "" not in old_units:
                continue
        same.append(slot)
    return sorted(same)
