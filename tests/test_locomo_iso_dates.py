"""A LoCoMo file whose session dates are ISO 8601 date-times (`2023-05-08T13:56:00Z`, the
form a program writes) is read with its dates. The date parser's ISO pattern needed a word
boundary after the day, which the "T" of a date-time is not: every such date went
unparsed, and the sessions were stored at made-up times (13 Sep 2020, then a day per
session), the dates the contexts show beside each turn. Real SQLite, a tiny hand-made file."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from conftest import eval_memory
from locomo_mini import question, sample, write

from tiermem.evals.locomo import parse_session_date, run_locomo
from tiermem.tiers.embed_onnx import FastEmbedder

BUDGET = 500


def _utc(*parts: int) -> float:
    return dt.datetime(*parts, tzinfo=dt.UTC).timestamp()  # type: ignore[misc]


@pytest.mark.parametrize(("text", "want"), [
    ("2023-05-08T13:56:00Z", _utc(2023, 5, 8, 13, 56)),  # UTC, as JSON serializers write it
    ("2023-05-08T13:56:00+02:00", _utc(2023, 5, 8, 11, 56)),  # an offset: the same instant in UTC
    ("2023-05-08T13:56:00.250Z", _utc(2023, 5, 8, 13, 56) + 0.25),  # fractional seconds
    ("2023-05-08T13:56", _utc(2023, 5, 8, 13, 56)),  # no zone: UTC, as every other form
    ("2023-05-08", _utc(2023, 5, 8)),  # a date alone: midnight (parsed before too)
    ("2023-05-08 13:56", _utc(2023, 5, 8, 13, 56)),  # a space for the "T" (parsed before too)
    ("1:56 pm on 8 May, 2023", _utc(2023, 5, 8, 13, 56)),  # LoCoMo's own form, unchanged
])
def test_iso_date_times_parse(text: str, want: float) -> None:
    assert parse_session_date(text) == want


def test_a_file_with_iso_dates_is_stored_at_its_dates(tmp_path: Path, embedder: FastEmbedder) -> None:
    s = sample("iso", ["I adopted a cat.", "What is its name?"], [question("What did Ann adopt?", "cat", ["D1:1"])])
    s["conversation"]["session_1_date_time"] = "2023-05-08T13:56:00Z"
    data = write(tmp_path / "iso.json", [s])
    with eval_memory(tmp_path / "d", embedder, hot=False) as o:
        res = run_locomo(o.memory, data, [BUDGET], methods=["full_context"]).result
        stored = o.memory.history(res["conversation_ids"][0], namespace=res["conversation_ids"][0])
    assert res["unparsed_dates"] == 0
    # one second per turn from the session's date, as for LoCoMo's own date form
    assert [m.created_at for m in stored] == [_utc(2023, 5, 8, 13, 56), _utc(2023, 5, 8, 13, 56, 1)]
