"""The LangChain adapters' tests' shared parts: langchain-core's fake chat model able to
bind tools and recording what each call received, and a weather tool. Import after the
test module's `pytest.importorskip`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import BaseMessage
from langchain_core.tools import tool


class RecordingFakeModel(GenericFakeChatModel):
    """The fake chat model, able to bind tools, recording what each call received."""

    received: list[list[BaseMessage]] = []  # noqa: RUF012 (a pydantic field, per instance below)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> RecordingFakeModel:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.received.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny and 21C in {city}"
