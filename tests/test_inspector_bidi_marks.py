"""Stored text with invisible bidirectional controls is shown with each control as a
visible mark on every inspector page, never raw.

Before (a review, 2026-12-07): the pages rendered them raw, so stored text displayed
spoofed: "refund to invoice \\u202e4321-FDP.exe" read "refund to invoice exe.PDF-1234", a
session "sess\\u202eevil" read "sesslive", in the log, the views, the source turns and the
plan's messages. Every page case below failed then (the raw characters were in the page).

Now one Jinja filter (`controls`, tiermem.inspector.routes) escapes the text and turns
each of U+202A-202E, U+2066-2069, U+200E, U+200F and U+061C into
`<span class=ctl>⟨U+202E⟩</span>`. Real SQLite under tmp_path, real consolidation, the
real app through TestClient.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from tiermem import Config, Memory
from tiermem.service import create_app
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")

TOKEN = "tok-acme-bidi-0123456789"
HX = {"HX-Request": "true"}
CONV = "spoof-1"
# every control the filter marks: embeddings and overrides, isolates, the marks
CONTROLS = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
BIDI_CONTROLS = re.compile(f"[{CONTROLS}]")  # the test's own: not the code's list
SESSION = "sess\u202eevil"  # read "sesslive" raw
SPOOF = "refund to invoice \u202e4321-FDP.exe"  # read "refund to invoice exe.PDF-1234" raw


def mark(ch: str) -> str:
    return f"<span class=ctl>\u27e8U+{ord(ch):04X}\u27e9</span>"


def messages() -> list[dict[str, object]]:
    return [
        {"role": "user", "content": f"{SPOOF}. Please refund it today.", "session_id": SESSION},
        {"role": "assistant", "content": None, "session_id": SESSION,
         "tool_calls": [{"id": "call_1", "type": "function",
                         "function": {"name": "find\u2066invoice", "arguments": '{"id": "\u202d4321"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "session_id": SESSION, "content": f"found \u200f{CONTROLS} 4321"},
        {"role": "assistant", "content": f"I refunded the invoice {CONTROLS} for you.", "session_id": SESSION},
        {"role": "user", "content": "Always email me \u061cthe receipt, never call.", "session_id": SESSION},
    ]


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[Memory]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("bidi") / "data", auth_tokens={TOKEN: "acme"}, store_plans=True)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as m:
        m.append_many(CONV, messages(), namespace="acme")
        m.catch_up()
        assert m.consolidate(CONV, namespace="acme") >= 1  # the rolling and the session view, from that text
        m.context(CONV, "what about the invoice?", 5_000, namespace="acme")  # a stored plan
        yield m


@pytest.fixture(scope="module")
def client(mem: Memory) -> Iterator[TestClient]:
    with TestClient(create_app(mem.config, mem, start_scheduler=False), base_url="http://127.0.0.1") as c:
        assert c.post("/ui/login", json={"token": TOKEN}, headers=HX).status_code == 200
        yield c


# (page, the controls whose marks it must show)
PAGES = [
    (f"/ui/c/{CONV}", "\u202e\u2066\u202d\u200f\u061c" + CONTROLS),  # the log: content, session, tool call and result
    (f"/ui/c/{CONV}/turns?positions=0,1,2,3", "\u202e\u200f" + CONTROLS),  # a sentence's source turns
    (f"/ui/c/{CONV}/views", "\u202e"),  # views: the session key and the sentences drawn from the text
    (f"/ui/c/{CONV}/views?after=sess", "\u202e"),  # a later page of session views
    (f"/ui/c/{CONV}/plan?budget=5000", "\u202e" + CONTROLS),  # a what-if plan's messages
    (f"/ui/c/{CONV}/plans", ""),  # stored plans (reasons, notes): nothing raw
    ("/ui/", ""),  # the conversations list
    ("/ui/metrics", ""),  # the metrics page
]


@pytest.mark.parametrize(("path", "marked"), PAGES)
def test_page_shows_controls_as_marks(client: TestClient, path: str, marked: str) -> None:
    r = client.get(path)
    assert r.status_code == 200, r.text
    raw = sorted({f"U+{ord(c):04X}" for c in BIDI_CONTROLS.findall(r.text)})
    assert not raw, f"{path} shows raw controls {raw}"
    for ch in set(marked):
        assert mark(ch) in r.text, f"{path} has no mark for U+{ord(ch):04X}"


def test_spoofed_text_reads_in_stored_order(client: TestClient) -> None:
    # the log's row reads left to right as stored, the mark where the override was
    html = client.get(f"/ui/c/{CONV}").text
    assert f"refund to invoice {mark(chr(0x202E))}4321-FDP.exe" in html
    assert f"sess{mark(chr(0x202E))}evil" in html


def test_pin_fragment_marks_too(client: TestClient) -> None:
    # the row a pin re-renders goes through the same template and filter
    r = client.post(f"/ui/c/{CONV}/pins", json={"position": 0, "pinned": True}, headers=HX)
    assert r.status_code == 200, r.text
    assert not BIDI_CONTROLS.search(r.text) and mark("\u202e") in r.text


@pytest.mark.parametrize(("value", "shown"), [
    (SPOOF, f"refund to invoice {mark(chr(0x202E))}4321-FDP.exe"),  # an override
    ("<b>\u2067x</b>", f"&lt;b&gt;{mark(chr(0x2067))}x&lt;/b&gt;"),  # escaped as before, then marked
    ("plain text, \u200b kept", "plain text, \u200b kept"),  # a zero-width space reorders nothing: kept
    (None, "None"),  # what Jinja prints for it
])
def test_filter(value: object, shown: str) -> None:
    from tiermem.inspector.routes import _controls
    assert str(_controls(value)) == shown


def test_filter_in_an_attribute_has_no_markup() -> None:
    from tiermem.inspector.routes import _controls
    out = str(_controls('a"\u202eb', in_attribute=True))
    assert out == "a&#34;\u27e8U+202E\u27e9b" and not re.search(r"[<>\"]", out)
