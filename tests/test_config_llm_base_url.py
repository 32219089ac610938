"""`llm_base_url` is checked at startup like the other URLs: the summarizer appends
`/chat/completions` to it, so it must be an http(s) URL with a host and nothing after
its path. A URL without a scheme (`localhost:8000/v1`) used to be accepted, and then
every refresh failed in the background with a transport error while no view was ever
written. A refusal names the field and never echoes the URL's password."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tiermem import Config

PASSWORD = "hunter2-pw"


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:8000/v1",  # a local server
    "https://api.example.com/v1/",  # a trailing slash
    "https://gateway.example.com/openai/team-a/v1",  # a path prefix
    f"https://bob:{PASSWORD}@llm.example.com/v1",  # credentials in the URL
    "http://[::1]:8080",  # an IPv6 host, no path
])
def test_accepted(url: str) -> None:
    assert Config(summarizer="llm", llm_model="m", llm_base_url=url).llm_base_url == url


@pytest.mark.parametrize(("url", "problem"), [
    ("localhost:8000/v1", "http:// or https://"),  # no scheme: the common slip
    (f"ftp://bob:{PASSWORD}@llm.example.com/v1", "http:// or https://"),  # another scheme
    ("http:///v1", "host"),  # no host
    (f"http://bob:{PASSWORD}@llm.example.com:99999/v1", "port"),  # a port out of range
    ("http://llm.example.com:abc/v1", "port"),  # a port that is no number
    (f"https://llm.example.com/v1?api_key={PASSWORD}", "query"),  # /chat/completions would follow the query
    ("https://llm.example.com/v1#frag", "fragment"),  # likewise after a fragment
    ("https://llm.example.com/v1?", "query"),  # an empty query still ends the path
    ("", "http:// or https://"),  # empty
])
def test_refused_naming_the_field_without_the_password(url: str, problem: str) -> None:
    with pytest.raises(ValidationError) as info:
        Config(summarizer="llm", llm_model="m", llm_base_url=url)
    text = str(info.value)
    assert "llm_base_url" in text and problem in text
    assert PASSWORD not in text


def test_refused_also_with_the_extractive_summarizer() -> None:
    # a bad value is a bad value whichever summarizer runs now
    with pytest.raises(ValidationError, match="llm_base_url"):
        Config(llm_base_url="localhost:8000/v1")
