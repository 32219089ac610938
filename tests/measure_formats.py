"""Measure the message formats (not a test; run `PYTHONPATH=$PWD python tests/measure_formats.py`):
how many of the SDK-built corpus messages append and come back equal, and how many
contexts (every context_format x system_messages, both conversations, budgets 200..6000)
validate against the openai SDK's request types."""

import itertools
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import sdk_corpus as s

from tiermem import Config, Memory

items = list(s.chat_corpus()) + [(f"responses[{i}]", b) for i, b in enumerate(s.responses_conversation())]
ok = 0
ctx_ok = ctx_n = 0
with Memory(Config(data_dir=tempfile.mkdtemp()), hot=False, background_indexing=False) as mem:
    for i, (_name, body) in enumerate(items):
        mem.append(f"one{i}", body)
        ok += mem.history(f"one{i}")[0].body == json.loads(json.dumps(body))
print(f"corpus: {ok}/{len(items)} SDK-built messages append and round-trip equal")
for fmt, sysm in itertools.product(["as_stored", "chat", "responses"], ["as_is", "merge", "before_latest"]):
    cfg = Config(data_dir=tempfile.mkdtemp(), context_format=fmt, system_messages=sysm)
    with Memory(cfg, hot=False, background_indexing=False) as mem:
        mem.append_many("chat", s.chat_conversation())
        mem.append_many("resp", s.responses_conversation())
        for conv in ("chat", "resp"):
            valid = {"chat": s.valid_chat, "responses": s.valid_responses}.get(fmt) or (
                s.valid_chat if conv == "chat" else s.valid_responses)
            for b in range(200, 6001, 100):
                try:
                    ctx = mem.context(conv, "which flight?", b)
                except Exception:
                    continue  # budget too small for the latest message
                ctx_n += 1
                try:
                    valid(ctx.messages)
                    assert ctx.tokens <= b
                    ctx_ok += 1
                except Exception as e:
                    print("INVALID", fmt, sysm, conv, b, str(e)[:200])
print(f"contexts: {ctx_ok}/{ctx_n} valid against the openai SDK request types (extra keys forbidden, no orphaned results, within budget)")
