"""Answer types: does a turn holding an expression of the kind the question asks for rank better?

    python -m tiermem.evals.atype_probe --data ../shared/data/locomo-dev.json \\
        --budgets 500,2000 --data-root /tmp/at/data --json-out atype.json

A classic QA-retrieval idea (issue 19), one the README's design notes had not tried: the
question's wh-form says what kind of answer it wants, and a turn that holds an expression of
that kind is likelier to be the answer than one that only shares the question's words.
`question_type` reads the kind from the question (English function words only):
- `place`: "where", "which / what city, country, place, ..." -> a preposition or a verb of
  going before a capitalised word ("in Boston", "visited Spain") or "went to the <noun>";
- `person`: "who", "whom", "whose" -> a capitalised word past a sentence's first that is
  not a participant's own name (the conversation's `names`), or "my <kin/role word>";
- `number`: "how many / much / long / old / often / far" -> a numeral, a number word or
  "once / twice / a couple / a few <noun>";
- `activity`: "what / which activities, hobbies, sports, events", "what does X do" -> a
  verb of doing or liking before a gerund ("went hiking", "love painting"), "played",
  "joined", "took up", "signed up", "practic-";
- `work`: "what / which book, movie, film, song, show, album, game, ..." -> quoted text,
  two capitalised words in a row past a sentence's first, "by / called / titled <Capital>".
Time ("when", "what year / date") is left to planner.dates and planner.timeline: no type.

Each mode asks every question with evidence at every budget as a what-if context
(`record=False`, as recall_rounds), one change at a time:
- `shipped`: the planner as it ships (the base every fold is scored against);
- `type-E`: among the retrieved candidates the planner scored for a recall question (its
  own conversation's, already cut to the depth it reads), those whose text holds an
  expression of the asked type get E added to their score, then the block is re-sorted
  (`density.pack_order`, identity at the shipped DENSITY_WEIGHT 0): a turn is never added,
  only moved among those scored. The Memory's own Candidates object has its `retrieved`
  wrapped (an instance attribute, deleted on exit: the class's method again).

Leave-one-conversation-out: for each sample, the mode with the best recall pooled over the
other samples' questions and every budget (one setting for all budgets; ties go to the
base), scored on the held-out sample against `shipped`, by budget and category
(name_probe.folds). Nothing here names a sample, a speaker, a topic or a question: the
participants' names come from the conversation (TurnTable.names).

Measured 2026-12-07 (issue 19; the command above with `--modes
shipped,type-0.5,type-1,type-2,type-4`, 12 min at load 12-18): 148 of the 757 dev
questions have a type; pooled held-out change -0.02 at 500 and +0.36 at 2,000, conv-41
-0.69 at 500. It fails the gate (+0.5 at both, no fold losing over 0.5): nothing shipped.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tiermem.evals.baselines import INCLUDED_FIDELITIES
from tiermem.evals.name_probe import Rec, folds, table
from tiermem.evals.recall_rounds import add_recall_args, load_checked, prepared, report
from tiermem.planner.candidates import RECALL_CLASSES
from tiermem.planner.density import pack_order

TYPE_MODE = "type"  # `type-E`: the asked type's boost E
DEFAULT_MODES = ("shipped", "type-0.25", "type-0.5", "type-1", "type-2")  # the first is the base
TYPES = ("place", "person", "number", "activity", "work")

# -- the question's type: English function words and wh-forms, nothing of any data's ----------
_PLACE_NOUNS = r"(?:city|cities|country|countries|state|town|place|places|location|locations|spot|destination)"
_ACT_NOUNS = r"(?:activity|activities|hobby|hobbies|sport|sports|event|events|pastime|pastimes)"
_WORK_NOUNS = (r"(?:book|books|novel|novels|movie|movies|film|films|song|songs|show|shows|series|album|albums"
               r"|game|games|band|bands|poem|poems|play|plays|painting|paintings|musical|musicals)")
_QUESTION_TYPES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("number", re.compile(r"\bhow (?:many|much|long|old|often|far)\b")),
    ("place", re.compile(r"^(?:\W*\w+\W+){0,2}?where\b|\b(?:which|what|in what|in which) " + _PLACE_NOUNS + r"\b")),
    ("person", re.compile(r"^(?:\W*\w+\W+){0,2}?(?:who|whom|whose)\b")),
    ("work", re.compile(r"\b(?:which|what)(?: \w+)? " + _WORK_NOUNS + r"\b")),
    ("activity", re.compile(r"\b(?:which|what)(?: \w+)? " + _ACT_NOUNS + r"\b"
                            r"|\bwhat (?:do|does|did) \w+(?: \w+)? do\b")),
)
_TIME = re.compile(r"^\W*when\b|\bhow long ago\b|\b(?:what|which) (?:year|date|day|month|time)\b")


def question_type(query: str) -> str | None:
    """The kind of answer `query` asks for (one of TYPES), or None: not a question of a
    type, or one of time (planner.dates and planner.timeline answer those)."""
    q = " ".join(query.lower().split())
    if _TIME.search(q):
        return None
    for kind, pat in _QUESTION_TYPES:
        if pat.search(q):
            return kind
    return None


# -- a turn's expressions of each type: surface patterns ---------------------------------------
_SPEAKER_LINE = re.compile(r"^\[[^\]]*\]\s*")  # render.line's "[name] " (or "[name date] ")
_SENTENCE_START = re.compile(r"(?:^|[.!?]\s+|\[image:\s*)(\w+)")
_CAP = r"[A-Z][a-zA-Z'\-]+"
_PLACE = re.compile(r"\b(?:in|at|to|from|near|around|across|visit|visited|visiting|toured|explored)"
                    r"\s+(?:the\s+)?(" + _CAP + r")"
                    r"|\b(?:went|go|goes|going|gone|been|moved|drove|flew|travell?ed|trip)\s+(?:back\s+)?to\s+"
                    r"(?:the|a|an|my|our)\s+[a-z]+")
_KIN = (r"(?:mom|mum|mother|dad|father|parents?|brother|sister|siblings?|son|daughter|kids?|children|husband"
        r"|wife|partner|boyfriend|girlfriend|friends?|grandma|grandpa|grandmother|grandfather|aunt|uncle"
        r"|cousin|family|boss|coworkers?|colleagues?|teacher|mentor|neighbou?r|coach|team ?mates?)")
_PERSON_WORDS = re.compile(r"\b(?:my|our|his|her|their)\s+(?:\w+\s+)?" + _KIN + r"\b", re.IGNORECASE)
_CAP_WORD = re.compile(r"\b(" + _CAP + r")\b")
_NUMBER_WORDS = (r"one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen"
                 r"|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety"
                 r"|hundred|hundreds|thousand|thousands|dozen|dozens|million|once|twice|half")
_NUMBER = re.compile(r"\b\d+(?:[.,]\d+)?\b|\b(?:" + _NUMBER_WORDS + r")\b|\ba (?:couple|few) (?:of )?[a-z]+",
                     re.IGNORECASE)
_ACTIVITY = re.compile(r"\b(?:go|goes|went|going|gone|been|love|loves|loved|enjoy|enjoys|enjoyed|like|likes|liked"
                       r"|started|start|tried|try|trying|into|took up|take up|do|does|did|doing|done|tried out)"
                       r"\s+(?:some\s+|a lot of\s+|more\s+)?[a-z]{3,}ing\b"
                       r"|\b(?:played|playing|joined|joining|took up|signed up|practic\w*|volunteer\w*|competed|compete)\b",
                       re.IGNORECASE)
_QUOTED = re.compile(r"\"[^\"]{2,80}\"|\u201c[^\u201d]{2,80}\u201d")
_TITLE = re.compile(r"\b(?:by|called|titled|named|read|reading|watched|watching|listened to|listening to|play(?:ed|ing)?)"
                    r"\s+(?:the\s+)?" + _CAP + r"|\b" + _CAP + r"(?:\s+(?:of|the|and|in|a|to)){0,2}\s+" + _CAP)


def _text(line: str) -> str:
    return _SPEAKER_LINE.sub("", line, count=1)


def _mid_capitals(text: str, names: frozenset[str]) -> list[str]:
    """Capitalised words that do not begin a sentence and are not a participant's name or 'I'."""
    starts = {m.start(1) for m in _SENTENCE_START.finditer(text)}
    low = {n.lower() for n in names}
    return [m.group(1) for m in _CAP_WORD.finditer(text)
            if m.start(1) not in starts and m.group(1) != "I" and not m.group(1).startswith("I'")
            and m.group(1).lower().removesuffix("'s") not in low]


def holds_type(text: str, kind: str, names: frozenset[str] = frozenset()) -> bool:
    """Whether `text` (a turn's, without its speaker prefix) holds an expression of `kind`."""
    if kind == "number":
        return bool(_NUMBER.search(text))
    if kind == "activity":
        return bool(_ACTIVITY.search(text))
    low = {n.lower() for n in names}
    if kind == "place":
        for m in _PLACE.finditer(text):
            word = m.group(1)
            if word is None or (word != "I" and word.lower().removesuffix("'s") not in low):
                return True
        return False
    if kind == "person":
        return bool(_PERSON_WORDS.search(text)) or bool(_mid_capitals(text, names))
    if kind == "work":
        if _QUOTED.search(text):
            return True
        starts = {m.start(1) for m in _SENTENCE_START.finditer(text)}
        for m in _TITLE.finditer(text):
            words = [w for w in re.findall(_CAP, m.group(0)) if w != "I" and w.lower() not in low]
            if words and (m.start() not in starts or len(words) > 1):
                return True
        return False
    raise ValueError(f"kind {kind!r}: the types are {list(TYPES)}")


def type_boost(mode: str) -> float | None:
    """E of a `type-E` mode, else None."""
    head, _sep, rest = mode.partition("-")
    return float(rest) if head == TYPE_MODE else None


def valid_mode(mode: str) -> bool:
    try:
        return mode == "shipped" or type_boost(mode) is not None
    except ValueError:
        return False


def boosted(cands: Sequence[Any], conv: str, query: str, names: frozenset[str], extra: float) -> list[Any]:
    """`cands` (a `retrieved` block, best first) with `extra` added to the score of each of
    `conv`'s candidates that holds the asked type, in packing order again; unchanged when
    the query asks for no type."""
    kind = question_type(query)
    if kind is None or not extra:
        return list(cands)
    out = []
    for c in cands:
        if c.conversation_id == conv and holds_type(_text(c.source or c.text), kind, names):
            c = dataclasses.replace(c, score=c.score + extra, reason=f"{c.reason}, holds a {kind} {extra:+.2f}")
        out.append(c)
    out.sort(key=lambda c: (-c.score, *c.tie_order()))
    return pack_order(out)


@contextlib.contextmanager
def answer_types(cands: Any, mode: str) -> Iterator[None]:
    """`cands.retrieved` (one Memory's Candidates) boosting the asked type in a `type-E` mode."""
    extra = type_boost(mode)
    if not extra:
        yield
        return
    retrieved = cands.retrieved

    def _retrieved(conv: str, namespace: str, query: str | None, qvec: Any, qclass: str, room: int,
                   **kw: Any) -> list[Any]:
        out = retrieved(conv, namespace, query, qvec, qclass, room, **kw)
        if not query or qclass not in RECALL_CLASSES:
            return out
        return boosted(out, conv, query, kw["table"].names, extra)

    cands.retrieved = _retrieved
    try:
        yield
    finally:
        del cands.retrieved  # the class's method again


def run(data: Path, budgets: Sequence[int], *, data_root: Path, sample_questions: int | None = None,
        modes: Sequence[str] = DEFAULT_MODES) -> dict[str, Any]:
    recs: dict[str, dict[str, list[Rec]]] = {m: {str(b): [] for b in budgets} for m in modes}
    typed: dict[str, int] = {k: 0 for k in TYPES}
    samples = load_checked(data)  # refused before any data dir is made
    for prep in prepared(samples, data_root, hot=True, sample_questions=sample_questions):
        memory, cid = prep.memory, prep.ingested.conversation_id
        for q in prep.questions:
            if (kind := question_type(q.qa.question)) is not None:
                typed[kind] += 1
        for m in modes:
            with answer_types(memory.planner.candidates, m):
                for q in prep.questions:
                    for b in budgets:
                        ctx = memory.context(cid, q.qa.question, budget=b, namespace=cid, record=False)
                        got = {p for it in ctx.plan.items if it.conversation_id == cid
                               and it.fidelity in INCLUDED_FIDELITIES for p in it.positions}
                        hit = sum(1 for p in q.evidence_positions if p in got)
                        recs[m][str(b)].append((prep.label, q.qa.category, hit / len(q.evidence_positions)))
    return {"data": str(data), "budgets": list(budgets), "modes": list(modes), "typed_questions": typed,
            "records": recs, "folds": folds(recs, list(modes), [str(b) for b in budgets])}


def _table(result: dict[str, Any]) -> str:
    return f"typed questions: {result['typed_questions']}\n" + table(result)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tiermem.evals.atype_probe", description=__doc__.split("\n")[0])
    add_recall_args(ap, budgets="500,2000")
    ap.add_argument("--modes", default=",".join(DEFAULT_MODES),
                    help="comma-separated: shipped, type-E (E: the boost); the first is the base")
    args = ap.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in modes if not valid_mode(m)]
    if bad or not modes:
        ap.error(f"--modes: {bad[0] if bad else '(none)'!r} is not shipped or type-E")
    return report(args, lambda: run(args.data, args.budgets, data_root=args.data_root,
                                    sample_questions=args.sample_questions, modes=modes), _table)


if __name__ == "__main__":
    raise SystemExit(main())
