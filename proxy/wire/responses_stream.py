"""A whole Response as the Responses API streams it, and reading what a stream says at its end.

`response_events` is used where the proxy had to see the whole answer before the client may (the
proxy's own tool rounds, or an answer checked against the knowledge base): the client still gets
the API's typed events, in the API's order, ending with `response.completed`. `StreamTail` watches
a relayed stream for its `response.completed` event (usage, the answering model) without holding
or re-encoding any byte of it.
"""

from __future__ import annotations

import copy
import json
from typing import Any

Response = dict[str, Any]
TAIL_BYTES = 256 * 1024  # a `response.completed` event repeats the whole output; keep enough of it


def response_events(response: Response) -> list[dict[str, Any]]:
    """The events that stream `response`: created, each output item (added, its parts or
    arguments, done), completed; numbered by `sequence_number`."""
    started = {**copy.deepcopy(response), "status": "in_progress", "output": [], "usage": None}
    events: list[dict[str, Any]] = [{"type": "response.created", "response": started}]
    for index, item in enumerate(response.get("output") or []):
        events += _item_events(index, item)
    events.append({"type": "response.completed", "response": response})
    return [{**event, "sequence_number": n} for n, event in enumerate(events)]


def _item_events(index: int, item: dict[str, Any]) -> list[dict[str, Any]]:
    kind = item.get("type")
    opening = {**item, "status": "in_progress"}
    if kind == "message":
        opening["content"] = []
    elif kind == "function_call":
        opening["arguments"] = ""
    events: list[dict[str, Any]] = [{"type": "response.output_item.added", "output_index": index, "item": opening}]
    item_id = item.get("id", "")
    if kind == "message":
        for j, part in enumerate(item.get("content") or []):
            where = {"item_id": item_id, "output_index": index, "content_index": j}
            text = part.get("text", "") if part.get("type") == "output_text" else None
            events.append({"type": "response.content_part.added", **where, "part": {**part, "text": ""} if text is not None else part})
            if text is not None:
                events.append({"type": "response.output_text.delta", **where, "delta": text, "logprobs": []})
                events.append({"type": "response.output_text.done", **where, "text": text, "logprobs": []})
            events.append({"type": "response.content_part.done", **where, "part": part})
    elif kind == "function_call":
        arguments = item.get("arguments", "")
        where = {"item_id": item_id, "output_index": index}
        events.append({"type": "response.function_call_arguments.delta", **where, "delta": arguments})
        events.append({"type": "response.function_call_arguments.done", **where, "arguments": arguments,
                       "name": item.get("name", "")})
    events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    return events


def encode_event(event: dict[str, Any]) -> bytes:
    """One server-sent event: its type as the `event:` name, the object as `data:`."""
    data = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
    return f"event: {event['type']}\ndata: {data}\n\n".encode()


class StreamTail:
    """What a relayed Responses stream said at its end, read from its last bytes."""

    def __init__(self) -> None:
        self.tail = b""

    def feed(self, chunk: bytes) -> None:
        self.tail = (self.tail + chunk)[-TAIL_BYTES:]

    def completed(self) -> Response | None:
        """The `response.completed` event's response, or None (the stream was cut, or it failed)."""
        at = self.tail.rfind(b'"type":"response.completed"')
        if at < 0:
            at = self.tail.rfind(b'"type": "response.completed"')
        if at < 0:
            return None
        start = self.tail.rfind(b"data:", 0, at)
        end = self.tail.find(b"\n", at)
        try:
            event = json.loads(self.tail[start + 5:end if end >= 0 else None])
        except ValueError:
            return None
        response = event.get("response") if isinstance(event, dict) else None
        return response if isinstance(response, dict) else None
