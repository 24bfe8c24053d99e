"""The Responses API (`POST /v1/responses`) in the chat form policies read, and back.

    parsed = parse_request(body)                 # parsed.messages / .tools / .tool_choice: chat form
    ... policies edit the messages and tools ...
    body = render_request(body, parsed, messages, tools)   # unchanged parts byte for byte

Answers: `answer_text`, `calls_in_answer`, `replace_answer`, `proxy_response`,
`proxy_stream_events`. Everything here is pure: no I/O.
"""

from __future__ import annotations

from .responses_answer import (
    answer_text,
    calls_in_answer,
    output_message,
    proxy_response,
    proxy_stream_events,
    replace_answer,
    without_tools,
)
from .responses_parse import InvalidRequest, ParsedRequest, chat_tool, parse_request, responses_tool
from .responses_render import UNCHANGED, render_request, render_tools

__all__ = [
    "UNCHANGED", "InvalidRequest", "ParsedRequest", "answer_text", "calls_in_answer", "chat_tool",
    "output_message", "parse_request", "proxy_response", "proxy_stream_events", "render_request", "render_tools",
    "replace_answer", "responses_tool", "without_tools",
]
