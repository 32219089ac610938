"""A long text's token ids: remembered per memo scope (a few, bounded in bytes).

One context() encoded each long tool output of the latest round up to three times (its
tail unit, the round's fit, its retrieved line), and an agent loop asked again on every
step. Encodings must stay exact (the same ids as encoding afresh, a list the caller may
change), be found again only in the scope they were made in, be forgotten by
`clear_memo` (an erasure) and stay within ENCODE_MEMO_MAX_ENTRIES entries of at most
ENCODE_MEMO_MAX_ENTRY_BYTES each."""

from __future__ import annotations

import json

import pytest

from tiermem import Memory
from tiermem.tiers import tokens
from tiermem.tiers.memo import remembered_for
from tiermem.tiers.tokens import ENCODE_MEMO_MAX_ENTRIES, ENCODE_MEMO_MIN_CHARS, BpeTokenCounter

SCOPE = "db\0c\0conv"
OTHER = "db\0c\0other"
LOGS = " ".join(f"line {j} of file: status ok value {j * 7 % 101}" for j in range(2_000))  # ~80 kB

# texts remembered (at least ENCODE_MEMO_MIN_CHARS, entry within the byte bound)
TEXTS = [
    LOGS,  # a tool output of log lines
    "日本語のテキスト、" * 3_000,  # CJK: several bytes a character
    "emoji 🧪 and accents éàü " * 1_000,  # characters split over several tokens
    "x" * (tokens.CHUNK_CHARS + 5_000),  # no safe cut: one chunk runs into the next
]


@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_a_remembered_encoding_is_the_fresh_one_and_the_callers(text: str) -> None:
    counter = BpeTokenCounter()
    fresh = BpeTokenCounter().encode(text)
    with remembered_for(SCOPE):
        first = counter.encode(text)
        first.append(-1)  # the caller's list: changing it changes nothing remembered
        second = counter.encode(text)
    assert counter.encode_hits == 1  # the second: remembered
    assert second == fresh and first[:-1] == fresh
    assert counter.decode(second) == text


def test_an_encoding_is_found_in_its_scope_only() -> None:
    counter = BpeTokenCounter()
    with remembered_for(SCOPE):
        ids = counter.encode(LOGS)
    with remembered_for(OTHER):  # another conversation's (another tenant's) call: encoded afresh
        assert counter.encode(LOGS) == ids and counter.encode_hits == 0
    with remembered_for([SCOPE, OTHER]):  # a scope of several: neither answers nor remembers
        assert counter.encode(LOGS) == ids and counter.encode_hits == 0
    with remembered_for(SCOPE):
        assert counter.encode(LOGS) == ids and counter.encode_hits == 1


def test_clear_memo_forgets_the_encodings() -> None:
    counter = BpeTokenCounter()
    with remembered_for(SCOPE):
        ids = counter.encode(LOGS)
    counter.clear_memo()  # an erasure: no copy of the text kept
    assert LOGS not in counter._encode_memo and len(counter._encode_memo) == 0
    with remembered_for(SCOPE):
        assert counter.encode(LOGS) == ids and counter.encode_hits == 0


# (text, why it is not remembered)
NOT_REMEMBERED = [
    ("y " * (ENCODE_MEMO_MIN_CHARS // 2 - 1), "shorter than ENCODE_MEMO_MIN_CHARS: encodes in about a millisecond"),
    (LOGS * 8, "~640 kB and its ids: over ENCODE_MEMO_MAX_ENTRY_BYTES"),
]


@pytest.mark.parametrize(("text", "why"), NOT_REMEMBERED, ids=range(len(NOT_REMEMBERED)))
def test_short_texts_and_oversized_entries_are_not_remembered(text: str, why: str) -> None:
    counter = BpeTokenCounter()
    with remembered_for(SCOPE):
        ids = counter.encode(text)
        assert counter.encode(text) == ids
    assert counter.encode_hits == 0 and len(counter._encode_memo) == 0, why


def test_the_encode_memo_is_bounded() -> None:
    counter = BpeTokenCounter()
    with remembered_for(SCOPE):
        for i in range(ENCODE_MEMO_MAX_ENTRIES * 2):
            counter.encode(f"{i} " + LOGS[:ENCODE_MEMO_MIN_CHARS])
    assert 0 < len(counter._encode_memo) <= ENCODE_MEMO_MAX_ENTRIES


def test_context_reuses_the_rounds_encodings_and_erasure_forgets_them(cold_memory: Memory) -> None:
    outputs = [f"file {i}: " + LOGS for i in range(3)]
    mem = cold_memory
    mem.append("t", {"role": "user", "content": "Summarise these logs"})
    mem.append_many("t", [{"role": "assistant", "content": None, "tool_calls": [
        {"id": f"c{i}", "type": "function", "function": {"name": "read", "arguments": json.dumps({"f": i})}}
        for i in range(len(outputs))]}, *({"role": "tool", "tool_call_id": f"c{i}", "content": out}
                                          for i, out in enumerate(outputs))])
    assert isinstance(mem.tokens, BpeTokenCounter)
    first = mem.context("t", "Summarise these logs", 1500, preview=True)
    hits = mem.tokens.encode_hits
    again = mem.context("t", "Summarise these logs", 1500, preview=True)
    # the next call of the loop finds every output's encoding, and plans the same
    assert mem.tokens.encode_hits >= hits + len(outputs)
    assert again.messages == first.messages and again.plan.explain() == first.plan.explain()
    assert any(out in mem.tokens._encode_memo for out in outputs)
    mem.delete_conversation("t")
    assert not any(out in mem.tokens._encode_memo for out in outputs)
