"""Summarizers: the extractive default (token targets, provenance, signals) and the LLM
summarizer against a real local HTTP server (canned completions, 500s, timeouts)."""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tiermem.consolidation.summarize import (
    ExtractiveSummarizer,
    LLMSummarizer,
    SourceTurn,
    build_summarizer,
    parse_lines,
    split_sentences,
)
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.errors import SummarizerError
from tiermem.tiers.tokens import BpeTokenCounter
from tiermem.tiers.warm import render

DATA = Path(__file__).resolve().parent.parent / "evals" / "data" / "intent_labels.jsonl"


def labeled_turns(n: int | None = None) -> list[SourceTurn]:
    rows = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]
    if n is not None:
        rows = rows[:n]
    return [
        SourceTurn(
            position=i,
            role=r["role"],
            text=r["text"],
            intent=r["intent"],
            load_bearing=bool(r["load_bearing"]),
            priority=5 if r["load_bearing"] else 0,
        )
        for i, r in enumerate(rows)
    ]


# ---------------------------------------------------------------------------------------
# sentence splitting


@pytest.mark.parametrize(
    "text",
    [
        "One. Two! Three? Four",
        "Line one\nline two.  Then three.\n\n  - bullet four",
        "No punctuation at all but quite a few words " * 20,
        "…\n\n",
        'He said "stop." Then left.',
    ],
)
def test_split_sentences_are_exact_spans(text: str) -> None:
    spans = split_sentences(text)
    for s, e in spans:
        piece = text[s:e]
        assert piece == piece.strip() and piece
        assert "\n" not in piece
        assert len(piece.split()) <= 40
    # spans are ordered and disjoint
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))


# ---------------------------------------------------------------------------------------
# extractive


@pytest.mark.parametrize("target", [1, 8, 16, 40, 100, 300, 1000])
@pytest.mark.parametrize("with_embeddings", [False, True])
def test_extractive_never_exceeds_target_and_keeps_provenance(
    counter: BpeTokenCounter, embedder: FastEmbedder, target: int, with_embeddings: bool
) -> None:
    turns = labeled_turns(120)
    if with_embeddings:
        vecs = embedder.embed([t.text for t in turns])
        turns = [SourceTurn(**{**t.__dict__, "embedding": v}) for t, v in zip(turns, vecs, strict=True)]
    s = ExtractiveSummarizer(counter, None)
    out = s.summarize(turns, target_tokens=target)
    assert counter.count(render(out)) <= target
    by_pos = {t.position: t for t in turns}
    for sent in out:
        assert len(sent.positions) == 1
        assert sent.text in by_pos[sent.positions[0]].text
        assert sent.status == "current"
    # log order
    assert [x.positions[0] for x in out] == sorted(x.positions[0] for x in out)
    if target >= 40:
        assert len(out) >= 2


def test_extractive_prefers_load_bearing_and_corrections_over_chitchat(counter: BpeTokenCounter) -> None:
    turns = [
        SourceTurn(0, "user", "Hi there!", intent="chitchat"),
        SourceTurn(1, "assistant", "Hello! How can I help you today?", intent="chitchat"),
        SourceTurn(
            2,
            "user",
            "Never deploy to production on Fridays.",
            intent="instruction",
            load_bearing=True,
            priority=8,
        ),
        SourceTurn(3, "user", "The weather is nice today, I had a sandwich for lunch.", intent="statement"),
        SourceTurn(
            4,
            "user",
            "Actually, use the staging cluster eu-west-2 instead.",
            intent="correction",
            load_bearing=True,
            priority=7,
        ),
        SourceTurn(5, "user", "Thanks!", intent="chitchat"),
    ]
    out = ExtractiveSummarizer(counter).summarize(turns, target_tokens=24)
    texts = [s.text for s in out]
    assert "Never deploy to production on Fridays." in texts
    assert "Actually, use the staging cluster eu-west-2 instead." in texts
    assert not any(t in texts for t in ("Hi there!", "Thanks!"))


def test_extractive_excludes_superseded_turns(counter: BpeTokenCounter) -> None:
    turns = [
        SourceTurn(
            0,
            "user",
            "Book the flight for Tuesday.",
            intent="instruction",
            load_bearing=True,
            superseded_by=1,
        ),
        SourceTurn(1, "user", "Actually make it Wednesday.", intent="correction", load_bearing=True),
    ]
    out = ExtractiveSummarizer(counter).summarize(turns, target_tokens=200)
    assert [s.positions for s in out] == [(1,)]


def test_extractive_truncates_a_single_long_sentence_to_fit(counter: BpeTokenCounter) -> None:
    long = "word " * 200
    out = ExtractiveSummarizer(counter).summarize([SourceTurn(7, "user", long.strip())], target_tokens=10)
    assert out and counter.count(render(out)) <= 10 and out[0].text in long


def test_extractive_handles_empty_and_degenerate_input(counter: BpeTokenCounter) -> None:
    s = ExtractiveSummarizer(counter)
    assert s.summarize([], target_tokens=50) == []
    assert s.summarize([SourceTurn(0, "user", "   ")], target_tokens=50) == []
    assert s.summarize([SourceTurn(0, "user", "ok")], target_tokens=0) == []
    # mixed embedding widths fall back to words instead of failing
    turns = [
        SourceTurn(0, "user", "alpha beta", embedding=np.ones(4, dtype=np.float32)),
        SourceTurn(1, "user", "gamma delta", embedding=np.ones(8, dtype=np.float32)),
    ]
    assert s.summarize(turns, target_tokens=50)


def test_extractive_is_deterministic(counter: BpeTokenCounter) -> None:
    turns = labeled_turns(80)
    a = ExtractiveSummarizer(counter).summarize(turns, target_tokens=120)
    b = ExtractiveSummarizer(counter).summarize(turns, target_tokens=120)
    assert a == b


def test_build_summarizer(counter: BpeTokenCounter) -> None:
    assert build_summarizer("extractive", tokens=counter).name == "extractive"
    assert build_summarizer("llm", tokens=counter, llm_base_url="http://x", llm_model="m").name == "llm:m"
    with pytest.raises(ValueError):
        build_summarizer("llm", tokens=counter)
    with pytest.raises(ValueError):
        build_summarizer("abstractive", tokens=counter)


# ---------------------------------------------------------------------------------------
# LLM summarizer against a real local server


class FakeLLM:
    """A chat-completions server on 127.0.0.1: `script` is a list of responses, one per
    request (the last repeats): ('ok', content) | ('status', code) | ('sleep', seconds) |
    ('raw', body)."""

    def __init__(self) -> None:
        self.script: list[tuple[str, Any]] = [("ok", "")]
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(n) or b"{}")
                fake.requests.append({"path": self.path, **body})
                fake.headers.append(dict(self.headers))
                i = min(len(fake.requests) - 1, len(fake.script) - 1)
                kind, arg = fake.script[i]
                if kind == "sleep":
                    time.sleep(arg)
                    kind, arg = "ok", "late [#0]"
                if kind == "status":
                    self.send_response(arg)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"{}")
                    return
                data = (
                    arg.encode()
                    if kind == "raw"
                    else json.dumps(
                        {"choices": [{"message": {"role": "assistant", "content": arg}}]}
                    ).encode()
                )
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    server = FakeLLM()
    yield server
    server.close()


def make_llm(server: FakeLLM, counter: BpeTokenCounter, **kw: Any) -> tuple[LLMSummarizer, list[float]]:
    sleeps: list[float] = []
    kw.setdefault("timeout_s", 2.0)
    kw.setdefault("retries", 2)
    s = LLMSummarizer(
        server.url, "tiny-model", "TIERMEM_TEST_LLM_KEY", tokens=counter, sleep=sleeps.append, **kw
    )
    return s, sleeps


TURNS = [
    SourceTurn(
        10, "user", "I need a hotel in Lisbon for three nights.", intent="instruction", load_bearing=True
    ),
    SourceTurn(11, "assistant", "Sure, what is your budget?", intent="question"),
    SourceTurn(
        12, "user", "Under 150 euros a night, and no hostels.", intent="instruction", load_bearing=True
    ),
    SourceTurn(13, "user", "Scratch that, 200 is fine.", intent="correction", superseded_by=None),
]


def test_llm_parses_refs_and_drops_lines_without_valid_refs(
    llm: FakeLLM, counter: BpeTokenCounter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIERMEM_TEST_LLM_KEY", "sk-test")
    llm.script = [
        (
            "ok",
            "Here is the summary:\n"
            "- User wants a Lisbon hotel for three nights [#10]\n"
            "- Budget raised to 200 euros a night, no hostels [#12, #13]\n"
            "- Invented fact [#99]\n"
            "1. Mixed refs keep the valid one [#11,#42]\n"
            "A line with no refs at all\n",
        )
    ]
    s, _ = make_llm(llm, counter)
    out = s.summarize(TURNS, target_tokens=200)
    assert [(x.text, x.positions) for x in out] == [
        ("User wants a Lisbon hotel for three nights", (10,)),
        ("Budget raised to 200 euros a night, no hostels", (12, 13)),
        ("Mixed refs keep the valid one", (11,)),
    ]
    req = llm.requests[0]
    assert req["path"] == "/v1/chat/completions" and req["model"] == "tiny-model"
    prompt = req["messages"][1]["content"]
    assert "[#10] user: I need a hotel" in prompt and "[#13]" in prompt
    assert llm.headers[0].get("Authorization") == "Bearer sk-test"


def test_llm_truncates_to_target(llm: FakeLLM, counter: BpeTokenCounter) -> None:
    llm.script = [
        ("ok", "\n".join(f"Fact number {i} about the Lisbon trip and its budget [#10]" for i in range(50)))
    ]
    s, _ = make_llm(llm, counter)
    for target in (12, 30, 100):
        out = s.summarize(TURNS, target_tokens=target)
        assert out and counter.count(render(out)) <= target


def test_llm_retries_500_then_succeeds(llm: FakeLLM, counter: BpeTokenCounter) -> None:
    llm.script = [("status", 500), ("status", 503), ("ok", "Lisbon, three nights [#10]")]
    s, sleeps = make_llm(llm, counter, backoff_s=0.25)
    out = s.summarize(TURNS, target_tokens=50)
    assert out[0].positions == (10,)
    assert len(llm.requests) == 3
    assert sleeps == [0.25, 0.5]  # exponential backoff


def test_llm_gives_up_after_retries(llm: FakeLLM, counter: BpeTokenCounter) -> None:
    llm.script = [("status", 502)]
    s, sleeps = make_llm(llm, counter, retries=2)
    with pytest.raises(SummarizerError, match="HTTP 502"):
        s.summarize(TURNS, target_tokens=50)
    assert len(llm.requests) == 3 and len(sleeps) == 2


def test_llm_does_not_retry_a_client_error(llm: FakeLLM, counter: BpeTokenCounter) -> None:
    llm.script = [("status", 401)]
    s, _ = make_llm(llm, counter)
    with pytest.raises(SummarizerError, match="HTTP 401"):
        s.summarize(TURNS, target_tokens=50)
    assert len(llm.requests) == 1


def test_llm_timeout_is_retried_then_fails(llm: FakeLLM, counter: BpeTokenCounter) -> None:
    llm.script = [("sleep", 1.0)]
    s, _ = make_llm(llm, counter, timeout_s=0.2, retries=1)
    t0 = time.perf_counter()
    with pytest.raises(SummarizerError, match="timeout"):
        s.summarize(TURNS, target_tokens=50)
    assert time.perf_counter() - t0 < 1.5
    assert len(llm.requests) == 2


@pytest.mark.parametrize(
    "reply",
    [
        ("raw", "not json"),
        ("raw", json.dumps({"choices": []})),
        ("ok", "a summary with no refs at all"),
    ],
)
def test_llm_unusable_answers_raise(llm: FakeLLM, counter: BpeTokenCounter, reply: tuple[str, Any]) -> None:
    llm.script = [reply]
    s, _ = make_llm(llm, counter)
    with pytest.raises(SummarizerError):
        s.summarize(TURNS, target_tokens=50)


def test_llm_connection_refused_raises(counter: BpeTokenCounter) -> None:
    server = FakeLLM()
    url = server.url
    server.close()
    sleeps: list[float] = []
    s = LLMSummarizer(url, "m", timeout_s=0.5, retries=1, tokens=counter, sleep=sleeps.append)
    with pytest.raises(SummarizerError, match="transport"):
        s.summarize(TURNS, target_tokens=50)


def test_parse_lines_edge_cases() -> None:
    valid = {1, 2, 3}
    assert parse_lines("fact [#1]", valid) == [("fact", (1,))]
    assert parse_lines("fact [1, 2].", valid) == [("fact", (1, 2))]
    assert parse_lines("* fact -- [#2,#2]", valid) == [("fact", (2,))]
    assert parse_lines("[#1]", valid) == []
    assert parse_lines("fact [#7]", valid) == []
    assert parse_lines("", valid) == []
