"""Time phrases said another way: a LoCoMo-format file whose turns tell the same times in
other common English forms, to measure how much of the temporal recall rests on the
phrasings of the dev conversations (issue 19).

Issue 19's evidence is that temporal questions recall about 9 points less on conversations
nobody here has seen than on the dev set. With one dev file the gap cannot be measured
directly; this gives a proxy. Every relative time phrase of a known form in every turn is
replaced by another phrase that names the same period in everyday English ("last Friday"
-> "on Friday", "last Fri" or "this past Friday"; "last month" -> "a month ago" or "a
month back"; "last weekend" -> "over the weekend" or "this past weekend"; ...). Questions,
answers, evidence ids, speakers and session dates are untouched, so the same evidence
recall harness scores both files and the difference is what the phrasing alone costs:

    python -m tiermem.evals.time_paraphrase --data ../shared/data/locomo-dev.json --out /tmp/tp.json
    python -m tiermem.evals.recall_rounds --data /tmp/tp.json --data-root /tmp/tp/data ...

(a separate `--data-root`: the recall harness reuses a data dir that holds a sample of the
same id and size, and the paraphrased samples have both).

With `--questions` the questions that open "When did / is / was ..." are opened another way
("On what date did", "Around when did", "In which month did", "At what point did"), and
`--no-turns` leaves the turns as they are, so the two can be measured apart.

Caveats, stated in every report: the alternatives are this project's own list of common
forms, some of which the planner reads and some of which it does not ("last Sat": Sat and
Sun are English words, so planner.timeline leaves them unread); it measures robustness to
phrasing, not recall on conversations nobody here wrote, and no weight may be chosen on it.

Invariants:
- Deterministic: a phrase's replacement is chosen by a hash of the seed, the turn's dia_id
  and the phrase's offset, so the same file and seed give the same output on any machine.
- Meaning-preserving by construction: each alternative names the period its phrase names,
  read against the same message date (a bare weekday in a sentence about the future would
  read as the coming one, and such sentences are left alone).
- Any LoCoMo-format file: what is not a turn's `text` is copied as it is.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_ABBREVIATIONS = {"Monday": "Mon", "Tuesday": "Tues", "Wednesday": "Wed", "Thursday": "Thurs", "Friday": "Fri",
                  "Saturday": "Sat", "Sunday": "Sun"}
_NUMBER_WORDS = {"two": "2", "three": "3", "four": "4", "five": "5", "six": "6"}
# A sentence that speaks of what is to come: its bare weekday would name the coming one.
_FUTURE = re.compile(r"\b(?:will|won't|going\s+to|gonna|plan(?:s|ning)?\s+to|can't\s+wait|looking\s+forward|"
                     r"hope\s+to|tomorrow|upcoming|next)\b|'ll\b", re.IGNORECASE)

Alternatives = Callable[[re.Match[str]], list[str]]


def _keep_case(original: str, replacement: str) -> str:
    """A replacement for a phrase that opened its sentence opens it too."""
    return replacement[:1].upper() + replacement[1:] if original[:1].isupper() else replacement


def _last_weekday(m: re.Match[str]) -> list[str]:
    day = m["d"].capitalize()
    return [f"on {day}", f"last {_ABBREVIATIONS[day]}", f"this past {day}"]


def _units_ago(m: re.Match[str]) -> list[str]:
    n, unit = m["n"].lower(), m["u"].lower()
    out = [f"{n} {unit}s back", f"{_NUMBER_WORDS[n]} {unit}s ago"]
    if n == "two":
        out.append(f"a couple of {unit}s ago")
    return out


# (name, pattern, alternatives); a pattern's match must not hold another's.
RULES: list[tuple[str, re.Pattern[str], Alternatives]] = [
    ("last <weekday>", re.compile(rf"\blast (?P<d>{'|'.join(_WEEKDAYS)})\b", re.IGNORECASE), _last_weekday),
    ("last weekend", re.compile(r"\blast weekend\b", re.IGNORECASE),
     lambda m: ["over the weekend", "this past weekend"]),
    ("last week", re.compile(r"\blast week\b(?!end)", re.IGNORECASE), lambda m: ["a week ago", "a week back"]),
    ("last month", re.compile(r"\blast month\b", re.IGNORECASE), lambda m: ["a month ago", "a month back"]),
    ("last year", re.compile(r"\blast year\b", re.IGNORECASE), lambda m: ["a year ago", "a year back"]),
    ("N units ago", re.compile(r"\b(?P<n>two|three|four|five|six) (?P<u>day|week|month|year)s ago\b", re.IGNORECASE),
     _units_ago),
    ("a few days ago", re.compile(r"\ba few days ago\b", re.IGNORECASE),
     lambda m: ["a couple of days ago", "several days ago", "the other day"]),
]


# Questions that ask when, asked another way (`--questions`): the same question, in the other
# forms people open it with. The forms name the same event; "In which month" asks for less
# precision, which evidence recall does not see.
_WHEN_DID = re.compile(r"^(\s*)When (did|is|was|were|will|does|do|has|have|had) ", re.IGNORECASE)
_WHEN_OPENERS = ("On what date {v} ", "Around when {v} ", "In which month {v} ", "At what point {v} ")


def paraphrase_question(text: str, *, seed: int, key: str, counts: Counter[str] | None = None) -> str:
    """A question that opens with "When <auxiliary>" opened another way; any other as it is."""
    m = _WHEN_DID.match(text)
    if m is None:
        return text
    opener = _pick([o.format(v=m[2].lower()) for o in _WHEN_OPENERS], seed, key, 0)
    if counts is not None:
        counts["when <auxiliary> (question)"] += 1
    return m[1] + opener + text[m.end():]


def _sentence_of(text: str, at: int) -> str:
    start = max(text.rfind(c, 0, at) for c in ".!?\n") + 1
    ends = [i for i in (text.find(c, at) for c in ".!?\n") if i >= 0]
    return text[start:min(ends) if ends else len(text)]


def _pick(options: list[str], seed: int, key: str, offset: int) -> str:
    digest = hashlib.sha256(f"{seed}\0{key}\0{offset}".encode()).digest()
    return options[int.from_bytes(digest[:4], "big") % len(options)]


def paraphrase(text: str, *, seed: int, key: str, counts: Counter[str] | None = None) -> str:
    """`text` with each known time phrase replaced by another naming the same period."""
    edits: list[tuple[int, int, str]] = []
    for name, pattern, alternatives in RULES:
        for m in pattern.finditer(text):
            if any(a < m.end() and m.start() < b for a, b, _ in edits):
                continue
            if name == "last <weekday>" and _FUTURE.search(_sentence_of(text, m.start())):
                continue  # "on Friday" there would name the coming Friday
            edits.append((m.start(), m.end(), _keep_case(m[0], _pick(alternatives(m), seed, key, m.start()))))
            if counts is not None:
                counts[name] += 1
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text


def paraphrase_file(data: Any, *, seed: int, turns: bool = True, questions: bool = False
                    ) -> tuple[Any, Counter[str]]:
    """A copy of a LoCoMo-format list with every turn's text (`turns`) and every question
    (`questions`) paraphrased, and the counts."""
    counts: Counter[str] = Counter()
    out = json.loads(json.dumps(data))
    for index, sample in enumerate(out if isinstance(out, list) else []):
        if questions and isinstance(sample, dict) and isinstance(sample.get("qa"), list):
            for n, qa in enumerate(sample["qa"]):
                if isinstance(qa, dict) and isinstance(qa.get("question"), str):
                    qa["question"] = paraphrase_question(qa["question"], seed=seed, key=f"{index}:{n}", counts=counts)
        conversation = sample.get("conversation") if isinstance(sample, dict) else None
        if not turns or not isinstance(conversation, dict):
            continue
        for key, session in conversation.items():
            if not (key.startswith("session_") and isinstance(session, list)):
                continue
            for turn in session:
                if isinstance(turn, dict) and isinstance(turn.get("text"), str):
                    turn["text"] = paraphrase(turn["text"], seed=seed, key=str(turn.get("dia_id", "")),
                                              counts=counts)
    return out, counts


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tiermem.evals.time_paraphrase", description=__doc__.split("\n")[0])
    p.add_argument("--data", type=Path, required=True, help="a LoCoMo-format JSON file")
    p.add_argument("--out", type=Path, required=True, help="where the paraphrased file goes")
    p.add_argument("--seed", type=int, default=0, help="which alternative each phrase gets")
    p.add_argument("--turns", action=argparse.BooleanOptionalAction, default=True,
                   help="say the turns' time phrases another way (default: on)")
    p.add_argument("--questions", action=argparse.BooleanOptionalAction, default=False,
                   help="open the questions that ask 'When did ...' another way (default: off)")
    a = p.parse_args(argv)
    if a.out.resolve() == a.data.resolve():
        p.error("--out must not be --data")
    out, counts = paraphrase_file(json.loads(a.data.read_text(encoding="utf-8")), seed=a.seed, turns=a.turns,
                                  questions=a.questions)
    a.out.write_text(json.dumps(out, indent=1), encoding="utf-8")
    print(f"{sum(counts.values())} phrases said another way, written to {a.out}")
    for name, n in counts.most_common():
        print(f"  {name}: {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
