"""Messages API answers: reading the model's, replacing a blocked one, writing the proxy's own
(plain and as stream events), and errors in Anthropic's shape."""

from __future__ import annotations

import json
from typing import Any

from .anthropic_parse import tool_call_of

Block = dict[str, Any]

# Anthropic's error type for each HTTP status (docs.anthropic.com, "Errors").
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def _content(response: dict[str, Any]) -> list[Block]:
    return [b for b in response.get("content") or [] if isinstance(b, dict)]


def answer_text(response: dict[str, Any]) -> str:
    """The text of a Message: its text blocks, joined (thinking and tool_use are not text)."""
    return "".join(str(b.get("text", "")) for b in _content(response) if b.get("type") == "text")


def tool_uses_in_answer(response: dict[str, Any]) -> list[Block]:
    """The tool_use blocks of a Message (each with id, name and input), in order."""
    return [b for b in _content(response) if b.get("type") == "tool_use"]


def answer_as_chat(response: dict[str, Any]) -> dict[str, Any]:
    """A Message as the chat assistant message the answer policies read (content + tool_calls)."""
    message: dict[str, Any] = {"role": "assistant", "content": answer_text(response)}
    calls = [tool_call_of(b) for b in tool_uses_in_answer(response)]
    if calls:
        message["tool_calls"] = calls
    return message


def replace_answer(response: dict[str, Any], text: str) -> dict[str, Any]:
    """A copy of `response` whose content is one text block (a blocked answer's notice), stop_reason
    refusal as a blocked stream's (wire/anthropic_gate.py), everything else (id, model, usage) kept."""
    return {**response, "content": [{"type": "text", "text": text}], "stop_reason": "refusal", "stop_sequence": None}


def _message(model: str, request_id: str, reason: str, content: list[Block], stop_reason: str | None, output_tokens: int) -> dict[str, Any]:
    return {
        "id": f"msg_ctxwarden_{request_id}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 0, "output_tokens": output_tokens},
        "ctxwarden": {"author": "proxy", "reason": reason},
    }


def _tokens(text: str) -> int:
    return max(1, len(text) // 4) if text else 0  # a rough count: the proxy's text cost no model tokens


def proxy_response(model: str, request_id: str, text: str, reason: str) -> dict[str, Any]:
    """A Message the proxy writes itself (a loop stopped, a question to the user), marked
    `"ctxwarden": {"author": "proxy", "reason": reason}`."""
    return _message(model, request_id, reason, [{"type": "text", "text": text}], "end_turn", _tokens(text))


def proxy_stream_events(model: str, request_id: str, text: str, reason: str) -> list[tuple[str, dict[str, Any]]]:
    """The proxy's own answer as Messages stream events: (event name, data) pairs."""
    start = _message(model, request_id, reason, [], None, 0)
    return [
        ("message_start", {"type": "message_start", "message": start}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": {"output_tokens": _tokens(text)}},
        ),
        ("message_stop", {"type": "message_stop"}),
    ]


def sse_event(event: str, data: dict[str, Any]) -> bytes:
    """One server-sent event as Anthropic frames it: `event:` line, `data:` line, blank line."""
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False, separators=(',', ':'))}\n\n".encode()


def error_type_for_status(status: int) -> str:
    """Anthropic's error type for an HTTP status; other 4xx → invalid_request_error, other 5xx → api_error."""
    if status in ERROR_TYPES:
        return ERROR_TYPES[status]
    return "api_error" if status >= 500 else "invalid_request_error"


def error_body(status: int, error_type: str | None, message: str) -> dict[str, Any]:
    """An error in Anthropic's shape: {"type": "error", "error": {"type", "message"}}.
    `error_type` None → the type Anthropic uses for `status`."""
    return {"type": "error", "error": {"type": error_type or error_type_for_status(status), "message": message}}
