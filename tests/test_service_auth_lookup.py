"""Token auth looks a token up instead of comparing it with every configured one, and
finds a namespace's reach through its ancestors instead of testing every prefix
(tiermem.service.auth `TokenAuth.grant` / `reach`), with the same answers as before.

On the code before (audit_scale finding 2) each request compared its token with every
configured token (2.7 ms a request at 20,000 tokens) and each observed context tested
every prefix (10 ms); the counting test below saw one comparison per token there. The
answers are checked against the former loops, kept here as the reference.
"""

from __future__ import annotations

import hmac

import pytest

import tiermem.service.auth as auth_mod
from tiermem.service.auth import Grant, TokenAuth
from tiermem.tiers.models import namespace_within

TOKENS = {
    "tok-acme-0123456789abcdef": "acme",  # a top-level prefix
    "tok-alice-0123456789abcdef": "acme/alice",  # overlaps acme, one level down
    "tok-alice-deep-0123456789ab": "acme/alice/projects/p1",  # overlaps both, deeper
    "tok-acme2-0123456789abcdef": "acme2",  # a sibling whose name starts like acme
    "tok-shared-ns-0123456789ab": "acme/alice",  # a second token of one prefix
    "tok+b64/token~0123456789_.==": "intl",  # every punctuation of a b64token (RFC 6750), padded
    "tok-x:y@z!\"%;-0123456789ab": "a.b/c_d/e-f",  # visible ASCII past b64token; a prefix of every allowed character
}
METRICS = ["tok-metrics-0123456789abcdef"]


def old_grant(tokens: dict[str, str], authorization: str | None) -> Grant | None:
    """The loop before: every token compared, no early exit."""
    given = TokenAuth._given(authorization)
    if given is None:
        return None
    found = None
    for known, ns in tokens.items():
        if hmac.compare_digest(known.encode("utf-8"), given):
            found = ns
    return Grant(found, found) if found is not None else None


def old_reach(tokens: dict[str, str], namespace: str) -> str | None:
    """The scan before: every prefix tested, the longest that covers wins."""
    covering = [p for p in set(tokens.values()) if namespace_within(namespace, p)]
    return max(covering, key=len) if covering else None


def auth(tokens: dict[str, str] = TOKENS) -> TokenAuth:
    return TokenAuth(tokens, enabled=True, default_namespace="default", max_id_chars=128, metrics_tokens=METRICS)


# (the Authorization header)
HEADERS = [
    *[pytest.param(f"Bearer {t}", id=f"known-{ns}-{i}") for i, (t, ns) in enumerate(TOKENS.items())],
    pytest.param("bearer tok-acme-0123456789abcdef", id="scheme-lowercase"),  # schemes are case-insensitive
    pytest.param("Bearer   tok-acme-0123456789abcdef  ", id="padded"),  # spaces around the token
    pytest.param("Bearer tok-acme-0123456789abcdeF", id="one-char-off"),  # unknown
    pytest.param("Bearer tok-acme-0123456789abcde", id="prefix-of-a-token"),  # unknown
    pytest.param("Bearer tok-acme-0123456789abcdef0", id="token-plus-one"),  # unknown
    pytest.param("Bearer tok-metrics-0123456789abcdef", id="metrics-token"),  # not a tenant's
    pytest.param("Bearer tok-revoked-0123456789abcd", id="revoked"),  # configured before, not now
    pytest.param("Bearer tok-caf\udcc3\udca9-0123456789abcdef", id="escaped-utf8"),  # café's bytes: no token
    pytest.param("Bearer tok-\udcff-0123456789abcdef", id="undecodable-byte"),  # no UTF-8 text has it
    pytest.param("Basic tok-acme-0123456789abcdef", id="other-scheme"),
    pytest.param("Bearer ", id="empty-token"),
    pytest.param("", id="empty-header"),
    pytest.param(None, id="no-header"),
]


@pytest.mark.parametrize("header", HEADERS)
def test_grant_answers_as_the_former_loop(header: str | None) -> None:
    assert auth().grant(header) == old_grant(TOKENS, header)


def test_a_known_token_grants_its_own_prefix() -> None:
    a = auth()
    for token, ns in TOKENS.items():
        assert a.grant(f"Bearer {token}") == Grant(ns, ns)


def test_a_revoked_token_grants_nothing() -> None:
    before = auth({**TOKENS, "tok-revoked-0123456789abcd": "acme"})
    assert before.grant("Bearer tok-revoked-0123456789abcd") == Grant("acme", "acme")
    assert auth().grant("Bearer tok-revoked-0123456789abcd") is None


# (the namespace a context was observed in)
NAMESPACES = [
    pytest.param("acme", id="a-prefix-itself"),
    pytest.param("acme/bob", id="below-the-top-prefix"),
    pytest.param("acme/alice", id="the-narrower-prefix-itself"),
    pytest.param("acme/alice/x/y", id="below-the-narrower"),
    pytest.param("acme/alice/projects/p1/z", id="below-the-deepest"),
    pytest.param("acme/alice/projects", id="between-two-prefixes"),
    pytest.param("acme2", id="the-sibling"),
    pytest.param("acme2/x", id="below-the-sibling"),
    pytest.param("acme3", id="uncovered-lookalike"),
    pytest.param("ac", id="a-string-prefix-not-a-namespace-prefix"),
    pytest.param("other/acme", id="prefix-name-not-at-the-top"),
    pytest.param("a.b/c_d/e-f/g", id="every-allowed-character"),
    pytest.param("a.b/c_d", id="above-a-prefix"),
    pytest.param("l1/l2/l3/l4/l5/l6/l7/l8", id="eight-levels-uncovered"),
    pytest.param("acme/2/3/4/5/6/7/8", id="eight-levels-covered"),
]


@pytest.mark.parametrize("namespace", NAMESPACES)
def test_reach_answers_as_the_former_scan(namespace: str) -> None:
    assert auth().reach(namespace) == old_reach(TOKENS, namespace)


def test_without_auth_every_request_is_granted_the_default() -> None:
    a = TokenAuth({}, enabled=False, default_namespace="default", max_id_chars=128)
    assert a.grant(None) == Grant(None, "default")
    assert a.reach("acme") is None


def test_the_work_of_a_request_does_not_grow_with_the_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    """Counts the token comparisons and prefix checks that grant and reach make with 10
    and with 1,000 configured tokens: the same (before: one of each per token)."""
    calls = {"compare": 0, "within": 0}
    real_compare = hmac.compare_digest

    def compare(a: bytes, b: bytes) -> bool:
        calls["compare"] += 1
        return real_compare(a, b)

    def within(ns: str, p: str) -> bool:
        calls["within"] += 1
        return namespace_within(ns, p)

    monkeypatch.setattr(auth_mod.hmac, "compare_digest", compare)
    monkeypatch.setattr(auth_mod, "namespace_within", within)
    seen = []
    for n in (10, 1000):
        a = auth({f"tok-{i:06d}-0123456789abcdef": f"tenant{i}" for i in range(n)})
        calls.update(compare=0, within=0)
        assert a.grant("Bearer tok-000005-0123456789abcdef") == Grant("tenant5", "tenant5")
        assert a.reach("tenant5/user7") == "tenant5"
        seen.append(dict(calls))
    assert seen[0] == seen[1]
