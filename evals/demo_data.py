"""The bundled demo conversation (`tiermem/data/demo_conversation.json`) as a tune data
set, so `tiermem tune` runs with no file of your own and outside the development checkout.

Its sessions become one conversation `demo-dani` (each session's turns at the file's
`seconds_between_turns` from the session's start); its questions become probes. A
question's evidence in the file is a phrase, not a message: a probe's evidence is, per
phrase, the first user message containing it (case-insensitive; the user said it, the
assistant's echo is not the source), else the first message of any role; for a question
with `stale` values (a corrected fact) the last such user message instead (the correction
is what must be found). A phrase found nowhere is counted as missing evidence.
"""

from __future__ import annotations

import datetime as dt
from importlib import resources
from pathlib import Path
from typing import Any

from tiermem.demo import DATA_FILE, load_conversation
from tiermem.evals.conversations import ConversationData, Dataset, Probe

DEFAULT_STEP_S = 60.0  # between turns when the file does not say


def demo_path() -> Path:
    return Path(str(resources.files("tiermem").joinpath("data", DATA_FILE)))


def _evidence(messages: list[dict[str, Any]], phrase: str, *, latest: bool) -> int | None:
    p = phrase.lower()
    hits = [i for i, m in enumerate(messages) if p in str(m.get("content", "")).lower()]
    users = [i for i in hits if messages[i].get("role") == "user"]
    pool = users or hits
    if not pool:
        return None
    return pool[-1] if latest else pool[0]


def demo_dataset() -> Dataset:
    doc = load_conversation()
    step = float(doc.get("seconds_between_turns", DEFAULT_STEP_S))
    conv = ConversationData(str(doc.get("conversation_id", "demo")))
    for session in doc["sessions"]:
        start = dt.datetime.fromisoformat(session["start"]).timestamp()
        for i, turn in enumerate(session["turns"]):
            conv.messages.append({"role": turn["role"], "content": turn["content"], "created_at": start + i * step,
                                  "session_id": str(session.get("id", ""))})
            conv.message_ids.append(None)
    for q in doc.get("questions", []):
        evidence: list[str | int] = []
        for phrase in q.get("evidence", []):
            found = _evidence(conv.messages, phrase, latest=bool(q.get("stale")))
            evidence.append(-1 if found is None else found)  # -1: no such message, counted as missing
        answer = q["evidence"][0] if len(q.get("evidence", [])) == 1 else None
        conv.probes.append(Probe(q["query"], evidence, answer))
    return Dataset(demo_path(), "demo", [conv])
