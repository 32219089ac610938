"""A `Message` whose body was edited after parsing (`model_copy(update=...)` keeps the
private `_sent_body` of the first parse, logprobs in it) fingerprints as the edited body only:
the fingerprint an earlier release took (`Fingerprint.also`) must be of what is sent now, or a
different request under a key that release recorded would be answered as a replay and not
written. The unedited message still carries it (the upgrade retry of 0626414)."""

from __future__ import annotations

from typing import Any

from tiermem.tiers.models import append_fingerprint, parse_message

LOGPROBS = [{"token": "The", "logprob": -0.2, "bytes": [84], "top_logprobs": []}]
REPLY: dict[str, Any] = {
    "type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
    "content": [{"type": "output_text", "text": "The code is 1234.", "annotations": [], "logprobs": LOGPROBS}]}
LIMIT_BYTES = 10**6


def _parse(raw: Any) -> Any:
    return parse_message(raw, stamp=False, max_content_bytes=LIMIT_BYTES, max_metadata_bytes=LIMIT_BYTES)


def test_an_edited_copy_does_not_carry_the_first_bodys_fingerprint() -> None:
    first = _parse(REPLY)
    edited = first.model_copy(update={"content": [{"type": "output_text", "text": "REDACTED", "annotations": []}]})
    as_first_sent = append_fingerprint([first]).also
    assert as_first_sent, "the unedited reply keeps the fingerprint as sent (logprobs dropped)"
    again = append_fingerprint([_parse(edited)])
    assert not (again.also & as_first_sent) and bytes(again) not in as_first_sent


def test_an_unedited_reparse_keeps_it() -> None:
    first = _parse(REPLY)
    assert append_fingerprint([_parse(first)]).also == append_fingerprint([first]).also
