"""Adapters where agents run: the OpenAI Agents SDK, LangChain, LangGraph, MCP, Anthropic.

Each takes a `Memory` or a `NamespacedMemory` (`mem.namespaced(ns)`) and a conversation
id (the `create_agent` middleware and the LangGraph hooks by default none: one instance
serves every thread of a graph, each run in the conversation its `thread_id` names);
the Agents session, the LangChain history, middleware and hooks, and `to_anthropic`
also take a blocking `tiermem.client.Client` of a shared `tiermem serve`. Each lives in its own module and imports its framework only there, so the base
install needs none of them: `pip install 'tiermem[agents]'` (or `langchain`,
`langchain-agent`, `langgraph`, `mcp`) for the one you use.

- `tiermem.adapters.openai_agents.TiermemSession`: the Agents SDK `Session` protocol,
  plus `model_input_filter()` for `RunConfig(call_model_input_filter=...)`.
- `tiermem.adapters.langchain.TiermemChatMessageHistory`: a `BaseChatMessageHistory`.
- `tiermem.adapters.langchain_agent.TiermemMiddleware`: middleware for LangChain v1's
  `create_agent`.
- `tiermem.adapters.langgraph.TiermemHooks`: `pre_model_hook` / `post_model_hook` for
  LangGraph's `create_react_agent` (deprecated in LangGraph 1.x for `create_agent`).
- `tiermem.adapters.mcp_server.build_server`: a FastMCP server (`tiermem mcp`).
- `tiermem.adapters.anthropic.from_anthropic` / `to_anthropic`: Anthropic Messages API
  messages and replies in, a context as a `messages.create` request (`AnthropicRequest`,
  its cache breakpoints `AnthropicBreakpoint`) out (needs no SDK itself;
  `tiermem[anthropic]` installs it for the agent).
"""

from __future__ import annotations

from typing import Any

_LAZY = {
    "TiermemSession": "tiermem.adapters.openai_agents",
    "TiermemChatMessageHistory": "tiermem.adapters.langchain",
    "TiermemMiddleware": "tiermem.adapters.langchain_agent",
    "TiermemHooks": "tiermem.adapters.langgraph",
    "build_server": "tiermem.adapters.mcp_server",
    "from_anthropic": "tiermem.adapters.anthropic",
    "to_anthropic": "tiermem.adapters.anthropic",
    "AnthropicRequest": "tiermem.adapters.anthropic",
    "AnthropicBreakpoint": "tiermem.adapters.anthropic",  # AnthropicRequest.breakpoints' items
}
__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
