"""Anthropic's Messages API (`POST /v1/messages`) ↔ the chat-completions conversation the policies read.

Pure conversion, no I/O:

- `parse_request(body)` → `ParsedRequest`: chat `messages` (system first; tool_result blocks as
  `tool` messages before their turn's text; assistant text + `tool_calls`, thinking blocks kept
  opaque under `thinking_blocks`), chat `tools`, `tool_choice`, the server tools set aside.
- `render_request(body, parsed, messages, tools, tool_choice=...)` → the Messages body for the
  edited conversation: unchanged messages as their original blocks (cache_control, thinking
  signatures byte for byte), roles alternating; `body` itself when nothing changed.
- answers: `answer_text`, `tool_uses_in_answer`, `answer_as_chat`, `replace_answer`,
  `proxy_response`, `proxy_stream_events`, `sse_event`, `error_body`, `error_type_for_status`;
  `render_tools` for the tools alone (the proxy's rounds).
"""

from .anthropic_answers import (
    ERROR_TYPES,
    answer_as_chat,
    answer_text,
    error_body,
    error_type_for_status,
    proxy_response,
    proxy_stream_events,
    replace_answer,
    sse_event,
    tool_uses_in_answer,
)
from .anthropic_parse import PROVIDER_KEY, THINKING_KEY, ParsedRequest, Piece, parse_request, tool_result_text
from .anthropic_render import part_to_block, render_request
from .anthropic_tools import UNCHANGED, AnthropicWireError, render_tools, tool_from_chat

__all__ = [
    "ERROR_TYPES",
    "PROVIDER_KEY",
    "THINKING_KEY",
    "UNCHANGED",
    "AnthropicWireError",
    "ParsedRequest",
    "Piece",
    "answer_as_chat",
    "answer_text",
    "error_body",
    "error_type_for_status",
    "parse_request",
    "part_to_block",
    "proxy_response",
    "proxy_stream_events",
    "render_request",
    "render_tools",
    "replace_answer",
    "sse_event",
    "tool_from_chat",
    "tool_result_text",
    "tool_uses_in_answer",
]
