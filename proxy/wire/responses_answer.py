"""Responses API answers: reading one, replacing one, and writing the proxy's own (plain or as
the SSE events the API streams)."""

from __future__ import annotations

import copy
import time
from typing import Any

Response = dict[str, Any]


def answer_text(response: Response) -> str:
    """The answer's text: every `output_text` part of every output message, joined as the
    openai SDK's `Response.output_text` joins them."""
    texts: list[str] = []
    for item in response.get("output") or []:
        if isinstance(item, dict) and item.get("type") == "message":
            for part in item.get("content") or []:
                if isinstance(part, dict) and part.get("type") == "output_text" and isinstance(part.get("text"), str):
                    texts.append(part["text"])
    return "".join(texts)


def calls_in_answer(response: Response) -> list[dict[str, Any]]:
    """The answer's function_call output items (each with name, arguments, call_id), in order."""
    return [item for item in response.get("output") or []
            if isinstance(item, dict) and item.get("type") == "function_call"]


def without_tools(response: Response, names: set[str] | frozenset[str]) -> Response:
    """`response` whose `tools` echo no longer lists the named function tools (the proxy's own,
    which the client never sent and never sees called); `response` itself when none is there."""
    tools = response.get("tools")
    if not isinstance(tools, list) or not any(isinstance(t, dict) and isinstance(t.get("name"), str) and t["name"] in names
                                              for t in tools):
        return response
    return {**response, "tools": [t for t in tools if not (isinstance(t, dict) and t.get("type") == "function"
                                                           and isinstance(t.get("name"), str) and t["name"] in names)]}


def replace_answer(response: Response, text: str) -> Response:
    """A copy of `response` whose whole output is one assistant message saying `text`, status
    "completed" (a blocked answer). The first output message's id is kept when there is one."""
    out = copy.deepcopy(response)
    first = next((i for i in response.get("output") or [] if isinstance(i, dict) and i.get("type") == "message"), {})
    message_id = first.get("id") or f"msg_{out.get('id') or 'ctxwarden'}"
    out["output"] = [output_message(message_id, text)]
    out["status"] = "completed"
    if "incomplete_details" in out:
        out["incomplete_details"] = None
    if "output_text" in out:  # some servers send the SDK's convenience field
        out["output_text"] = text
    return out


def output_message(message_id: str, text: str, status: str = "completed") -> dict[str, Any]:
    """An assistant output message item with one output_text part."""
    return {"id": message_id, "type": "message", "status": status, "role": "assistant",
            "content": [text_part(text)]}


def text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def proxy_response(model: str, request_id: str, text: str, reason: str, *, created_at: int | None = None,
                   status: str = "completed") -> Response:
    """A whole Response object written by the proxy (the upstream was not asked), marked
    `"ctxwarden": {"author": "proxy", "reason": reason}`; usage is zero."""
    created = int(time.time()) if created_at is None else created_at
    done = status == "completed"
    return {
        "id": f"resp_{request_id}", "object": "response", "created_at": created, "status": status,
        "completed_at": created if done else None, "error": None, "incomplete_details": None,
        "instructions": None, "max_output_tokens": None, "model": model,
        "output": [output_message(f"msg_{request_id}", text)] if done else [],
        "parallel_tool_calls": True, "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None}, "store": False, "temperature": None,
        "text": {"format": {"type": "text"}}, "tool_choice": "auto", "tools": [], "top_p": None,
        "truncation": "disabled", "usage": _zero_usage() if done else None, "user": None, "metadata": {},
        "ctxwarden": {"author": "proxy", "reason": reason},
    }


def _zero_usage() -> dict[str, Any]:
    return {"input_tokens": 0, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": 0, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 0}


def proxy_stream_events(model: str, request_id: str, text: str, reason: str, *,
                        created_at: int | None = None) -> list[dict[str, Any]]:
    """The SSE events (in order, numbered) that stream the proxy's answer as the Responses API
    streams one: created, output_item.added, content_part.added, output_text.delta,
    output_text.done, content_part.done, output_item.done, completed. Each event's `type` is
    also its SSE `event:` name."""
    created = int(time.time()) if created_at is None else created_at
    message_id = f"msg_{request_id}"
    where = {"item_id": message_id, "output_index": 0, "content_index": 0}
    events: list[dict[str, Any]] = [
        {"type": "response.created",
         "response": proxy_response(model, request_id, text, reason, created_at=created, status="in_progress")},
        {"type": "response.output_item.added", "output_index": 0,
         "item": {**output_message(message_id, text, "in_progress"), "content": []}},
        {"type": "response.content_part.added", **where, "part": text_part("")},
        {"type": "response.output_text.delta", **where, "delta": text, "logprobs": []},
        {"type": "response.output_text.done", **where, "text": text, "logprobs": []},
        {"type": "response.content_part.done", **where, "part": text_part(text)},
        {"type": "response.output_item.done", "output_index": 0, "item": output_message(message_id, text)},
        {"type": "response.completed", "response": proxy_response(model, request_id, text, reason, created_at=created)},
    ]
    return [{**event, "sequence_number": n} for n, event in enumerate(events)]
