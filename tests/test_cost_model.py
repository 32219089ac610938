"""Provider prompt-cache billing (evals.cost): OpenAI-style automatic prefix caching
from 1,024 tokens in 128-token steps, Anthropic-style breakpoints with a write premium,
a read discount and a minimum cacheable prefix, on rendered token ids.

These fail on the code before issue 22, which compared whole messages and modelled
neither the granularity, the minimum, the breakpoints nor the write premium.
"""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from tiermem.evals.cost import PROVIDERS, AnthropicCache, CacheRules, OpenAICache, Renderer, common_prefix_ids
from tiermem.tiers.tokens import BpeTokenCounter, messages_tokens


def ids(n: int, start: int = 0) -> np.ndarray:
    return np.arange(start, start + n, dtype=np.int64)


def test_common_prefix_of_id_arrays() -> None:
    a = ids(10)
    b = a.copy()
    b[7] = -9
    assert common_prefix_ids(a, b) == 7
    assert common_prefix_ids(a, a[:4]) == 4 and common_prefix_ids(a, ids(0)) == 0


@pytest.mark.parametrize(("shared", "length", "cached"), [
    (1023, 3000, 0),  # below the 1,024-token minimum nothing is cached
    (1024, 3000, 1024),  # exactly the minimum
    (1151, 3000, 1024),  # 127 tokens past it: not yet a whole 128-token step
    (1152, 3000, 1152),  # one step
    (3000, 3000, 2944),  # the same request again: the last token is always computed
])
def test_openai_caches_from_1024_tokens_in_128_token_steps(shared: int, length: int, cached: int) -> None:
    cache = OpenAICache(PROVIDERS["openai"])
    first = ids(length)
    assert cache.request(first).read == 0  # a cold cache
    second = first.copy()
    second[shared:] += 10_000_000  # differs from `shared` on
    bill = cache.request(second)
    assert bill.read == cached
    r = PROVIDERS["openai"]
    assert bill.billed(r) == pytest.approx((length - cached) + cached * r.read_ratio)


def test_anthropic_writes_at_its_breakpoints_and_reads_them_later() -> None:
    r = PROVIDERS["anthropic"]
    cache = AnthropicCache(r)
    ends = [600, 1200, 1500]  # three messages
    first = ids(1500)
    bill = cache.request(first, ends, [1])  # breakpoint after the second message (1,200 tokens)
    assert (bill.read, bill.written) == (0, 1200)
    assert bill.billed(r) == pytest.approx(300 + 1200 * 1.25)
    # the next turn repeats the first two messages and appends one: it reads them
    second = np.concatenate([first[:1200], ids(500, 5_000_000)])
    bill = cache.request(second, [600, 1200, 1700], [2])
    assert (bill.read, bill.written) == (1200, 500)
    assert bill.billed(r) == pytest.approx(1200 * 0.1 + 500 * 1.25)


def test_anthropic_minimum_prefix_and_lookback() -> None:
    r = PROVIDERS["anthropic"]
    cache = AnthropicCache(r)
    short = ids(900)
    assert cache.request(short, [900], [0]).written == 0  # under 1,024 tokens: not cacheable
    assert cache.request(short, [900], [0]).read == 0
    # a hit more than 20 messages before the only breakpoint is not found
    ends = [1100 + 10 * i for i in range(30)]
    long = ids(ends[-1])
    cache.request(long, ends, [0])  # writes the first 1,100 tokens
    assert cache.request(long, ends, [29]).read == 0
    assert cache.request(long, ends, [15]).read == 1100  # 15 messages back: found


def test_cache_rules_refuse_bad_values() -> None:
    with pytest.raises(ValidationError, match="write_ratio"):
        CacheRules(provider="anthropic", input_per_mtok=3.0, write_ratio=0.5)
    with pytest.raises(ValidationError, match="provider"):
        CacheRules(provider="acme", input_per_mtok=1.0)  # type: ignore[arg-type]


def test_rendering_counts_like_the_budget_and_keeps_roles_apart() -> None:
    counter = BpeTokenCounter()
    render = Renderer(counter)
    msgs = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello there"}]
    seq, ends = render.render(msgs)
    # per message: start, role, separator, text, end; then the assistant header
    assert seq.shape[0] == ends[-1] + render.priming.shape[0]
    expected = [3 + len(counter.encode(m["role"])) + len(counter.encode(m["content"])) for m in msgs]
    assert ends == [expected[0], expected[0] + expected[1]]
    # one role token per message here: the same size as the budget's accounting, plus one end marker each
    assert seq.shape[0] == messages_tokens(counter, msgs) + len(msgs)
    same_text_other_role, _ = render.render([{"role": "user", "content": "be brief"}])
    assert common_prefix_ids(seq, same_text_other_role) == 1  # only the start marker is shared
