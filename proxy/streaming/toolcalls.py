"""Streamed tool calls: assemble the deltas of a round, and rewrite the finish chunk announcing them."""

from __future__ import annotations

from typing import Any

from ..proxy_tools import Calls
from . import sse


def finish_as_stop(raw: bytes) -> bytes:
    """A finish chunk announcing tool calls that were all dropped (recall rounds used up) ends as "stop"."""
    event = next(iter(sse.EventSplitter().feed(raw)), None)
    obj = event.json() if event else None
    if not isinstance(obj, dict) or not any(c.get("finish_reason") == "tool_calls" for c in obj.get("choices") or []):
        return raw
    for choice in obj["choices"]:
        if choice.get("finish_reason") == "tool_calls":
            choice["finish_reason"] = "stop"
    return sse.encode(obj)


def add_tool_deltas(tool_deltas: dict[int, dict[str, Any]], deltas: list[dict[str, Any]]) -> None:
    """Append streamed tool-call pieces to the calls they belong to (by their index)."""
    for tc in deltas:
        if not isinstance(tc, dict):
            continue
        slot = tool_deltas.setdefault(tc.get("index", 0), {"id": "", "type": "function", "function": {"name": "", "arguments": ""}})
        slot["id"] = tc.get("id") or slot["id"]
        fn = tc.get("function") or {}
        slot["function"]["name"] += fn.get("name") or ""
        slot["function"]["arguments"] += fn.get("arguments") or ""


def assemble(tool_deltas: dict[int, dict[str, Any]]) -> Calls:
    return [tool_deltas[i] for i in sorted(tool_deltas)]
