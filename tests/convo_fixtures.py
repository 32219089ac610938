"""A small support conversation with every role (system, user, assistant with tool calls,
tool results, a Responses item) and labelled probes, in the conversations format of
`evals.conversations`, for the import and tune tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FILLER_TURNS = 6  # user/assistant pairs between the facts and the probes' questions


RECAP_REPLY = "The refund goes back to your Visa card ending 4242, as you asked."


def support_lines(conv: str = "support-1", *, recap: bool = False) -> list[dict[str, Any]]:
    """With `recap`, a last exchange after the filler whose reply restates the refund turns
    (indexes 5 and 6): the label-free reply recall has one reply with sources."""
    call = {"id": "call_1", "type": "function",
            "function": {"name": "lookup_order", "arguments": json.dumps({"order": "A-1142"})}}
    lines: list[dict[str, Any]] = [
        {"conversation_id": conv, "message": {"role": "system", "content": "You are a support agent for Acme."}},
        {"conversation_id": conv, "message_id": "fact-email", "session_id": "s1",
         "created_at": "2026-03-01T10:00:00", "message": {
             "role": "user", "content": "My order A-1142 never arrived. My email is dana@example.org."}},
        {"conversation_id": conv, "message_id": "call", "message": {
            "role": "assistant", "content": None, "tool_calls": [call]}},
        {"conversation_id": conv, "message_id": "result", "message": {
            "role": "tool", "tool_call_id": "call_1",
            "content": json.dumps({"order": "A-1142", "status": "lost in transit", "carrier": "PostNord"})}},
        {"conversation_id": conv, "message": {
            "role": "assistant", "content": "Your parcel A-1142 was lost in transit by PostNord."}},
        {"conversation_id": conv, "message_id": "fact-refund", "created_at": 1772359800, "role": "user",
         "content": "Please refund it to my Visa card ending 4242, not store credit."},
        {"conversation_id": conv, "message": {
            "type": "message", "role": "assistant", "content": [
                {"type": "output_text", "text": "Refund to the Visa ending 4242 is on its way.",
                 "annotations": []}]}},
    ]
    for i in range(FILLER_TURNS):
        lines.append({"conversation_id": conv, "role": "user",
                      "content": f"Unrelated question {i}: what are your opening hours on day {i}?"})
        lines.append({"conversation_id": conv, "role": "assistant",
                      "content": f"On day {i} we are open from nine to five."})
    if recap:
        lines.append({"conversation_id": conv, "role": "user", "content": "Remind me where my money goes?"})
        lines.append({"conversation_id": conv, "role": "assistant", "content": RECAP_REPLY})
    lines.append({"conversation_id": conv, "probe": {
        "question": "Which card should the refund go to?", "evidence": ["fact-refund"], "answer": "4242"}})
    lines.append({"conversation_id": conv, "probe": {
        "question": "What happened to order A-1142?", "evidence": ["result", 4]}})
    return lines


def write_jsonl(path: Path, lines: list[Any]) -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


def tiny_locomo() -> list[dict[str, Any]]:
    """A LoCoMo-format sample: two sessions, one question with evidence, one malformed id."""
    turns1 = [{"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a beagle called Biscuit."},
              {"speaker": "Bob", "dia_id": "D1:2", "text": "Lovely name for a dog!"}]
    turns2 = [{"speaker": "Ann", "dia_id": "D2:1", "text": "We hiked the Dolomites last week."},
              {"speaker": "Bob", "dia_id": "D2:2", "text": "Sounds wonderful."}]
    return [{"sample_id": "t-1",
             "conversation": {"speaker_a": "Ann", "speaker_b": "Bob",
                              "session_1_date_time": "1:56 pm on 8 May, 2023", "session_1": turns1,
                              "session_2_date_time": "2:00 pm on 15 May, 2023", "session_2": turns2},
             "qa": [{"question": "What is the name of Ann's dog?", "answer": "Biscuit", "evidence": ["D1:1"],
                     "category": 4},
                    {"question": "Where did Ann hike?", "answer": "Dolomites", "evidence": ["D2:1; D2:2"],
                     "category": 4}]}]


# Two questions about a one-session chat of Ana and Ben (the turns are each test's own:
# D1:1 is Ana's dog, D1:2 and D1:6 are Ben's pottery)
SMALL_QA = [
    {"question": "What kind of dog did Ana adopt?", "answer": "a whippet", "evidence": ["D1:1"], "category": 4},
    {"question": "What has Ben made at pottery?", "answer": "two bowls and a cup", "evidence": ["D1:2", "D1:6"],
     "category": 1},
]


def one_session_locomo(path: Path, turns: list[tuple[str, str]], qa: list[dict[str, Any]],
                       sample_ids: tuple[str, ...] = ("small-1",)) -> Path:
    """A LoCoMo-format file: `turns` ((speaker, text), the first two speakers as speaker_a
    and speaker_b) as one session, with `qa`, under each of `sample_ids`."""
    speakers = list(dict.fromkeys(s for s, _ in turns))
    convo = {"speaker_a": speakers[0], "speaker_b": speakers[1], "session_1_date_time": "1:56 pm on 8 May, 2023",
             "session_1": [{"speaker": s, "dia_id": f"D1:{i}", "text": t} for i, (s, t) in enumerate(turns, start=1)]}
    path.write_text(json.dumps([{"sample_id": sid, "conversation": convo, "qa": qa} for sid in sample_ids]))
    return path


def depot_notes(n: int = 40) -> list[dict[str, Any]]:
    """Plain turns after a standing instruction (a pin, so the stable layers are several
    system messages before the tail), ending on a question."""
    out: list[dict[str, Any]] = [{"role": "user", "content": "Always answer in British English, never in bullets."}]
    for i in range(n):
        out.append({"role": "user", "content": f"Note {i}: the parcel for client {i} ships from depot {i % 7}."})
        out.append({"role": "assistant", "content": f"Recorded note {i}, depot {i % 7}."})
    out.append({"role": "user", "content": "Which depot ships for client 3?"})
    return out
