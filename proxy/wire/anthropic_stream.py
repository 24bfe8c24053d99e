"""A whole Message as Anthropic's Messages API streams it, and what a relayed stream says.

`message_events` serves where the proxy had to see the whole answer before the client may (its
own tools' rounds, an answer checked against the knowledge base, an answer translated from chat
completions): the client still gets the API's events in the API's order. `MessageStreamWatch`
reads a relayed stream's usage and end without holding or re-encoding any byte of it.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

Event = tuple[str, dict[str, Any]]
HEAD_BYTES = 8192  # message_start (input usage, the model) is the first event
TAIL_BYTES = 65536  # message_delta (output usage, stop_reason) and message_stop are the last ones


def message_events(message: dict[str, Any]) -> list[Event]:
    """(event name, data) pairs that stream `message`: message_start, each content block (start,
    its deltas, stop), message_delta with the stop reason and output usage, message_stop."""
    usage = message.get("usage") or {}
    start = {**copy.deepcopy(message), "content": [], "stop_reason": None, "stop_sequence": None,
             "usage": {**usage, "output_tokens": 0}}
    events: list[Event] = [("message_start", {"type": "message_start", "message": start})]
    for index, block in enumerate(message.get("content") or []):
        events += _block_events(index, block)
    events.append(("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": message.get("stop_reason"),
                                               "stop_sequence": message.get("stop_sequence")},
                                     "usage": {"output_tokens": usage.get("output_tokens", 0)}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def _block_events(index: int, block: dict[str, Any]) -> list[Event]:
    kind = block.get("type")
    if kind == "text":
        opening, deltas = {**block, "text": ""}, [{"type": "text_delta", "text": block.get("text", "")}]
    elif kind == "tool_use":
        opening = {**block, "input": {}}
        deltas = [{"type": "input_json_delta", "partial_json": json.dumps(block.get("input", {}), ensure_ascii=False)}]
    elif kind == "thinking":
        opening = {**block, "thinking": "", "signature": ""}
        deltas = [{"type": "thinking_delta", "thinking": block.get("thinking", "")},
                  {"type": "signature_delta", "signature": block.get("signature", "")}]
    else:  # redacted thinking, server tool blocks: whole in their start event
        opening, deltas = block, []
    events: list[Event] = [("content_block_start", {"type": "content_block_start", "index": index, "content_block": opening})]
    events += [("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d}) for d in deltas]
    events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    return events


def encode(event: Event) -> bytes:
    name, data = event
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False, separators=(',', ':'))}\n\n".encode()


_INPUT = re.compile(rb'"input_tokens"\s*:\s*(\d+)')
_OUTPUT = re.compile(rb'"output_tokens"\s*:\s*(\d+)')
_MODEL = re.compile(rb'"model"\s*:\s*"([^"\\]{1,200})"')


class MessageStreamWatch:
    """The usage, model and end of a relayed Messages stream, from its first and last bytes."""

    def __init__(self) -> None:
        self.head = b""
        self.tail = b""

    def feed(self, chunk: bytes) -> None:
        if len(self.head) < HEAD_BYTES:
            self.head += chunk[: HEAD_BYTES - len(self.head)]
        self.tail = (self.tail + chunk)[-TAIL_BYTES:]

    @property
    def ended(self) -> bool:
        return b"message_stop" in self.tail

    def usage(self) -> dict[str, int] | None:
        """In chat's names (prompt/completion tokens), for the GenAI metrics."""
        found_in, found_out = _INPUT.search(self.head), _OUTPUT.findall(self.tail)
        out = {}
        if found_in:
            out["prompt_tokens"] = int(found_in.group(1))
        if found_out:
            out["completion_tokens"] = int(found_out[-1])
        return out or None

    def model(self) -> str | None:
        found = _MODEL.search(self.head)
        return found.group(1).decode("utf-8", "replace") if found else None
