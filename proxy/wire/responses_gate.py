"""What a Responses API stream means to the answer checker's gate (streaming/typed.py).

Text arrives in `response.output_text.delta` events; `response.output_text.done` and the
stream's last events (`completed`, `incomplete`, `failed`) close it. A blocked answer ends as the
API ends a message: the notice as the item's last delta, then its `done` events and
`response.completed`, whose response holds the message as the client saw it and is marked
`"ctxwarden": {"author": "proxy", "reason": "answer_blocked"}`. Events keep their
`sequence_number` order.
"""

from __future__ import annotations

import re
from typing import Any

from .responses_answer import output_message, text_part
from .responses_stream import encode_event

CLOSING = {"response.output_text.done", "response.content_part.done", "response.output_item.done",
           "response.completed", "response.incomplete", "response.failed"}
LAST = {"response.completed", "response.incomplete", "response.failed"}
_SEQUENCE = re.compile(rb'"sequence_number"\s*:\s*(\d+)')


class ResponsesDialect:
    def __init__(self) -> None:
        self.started: dict[str, Any] = {}  # the response of `response.created`
        self.completed: dict[str, Any] | None = None  # the response of the last event
        self.where: dict[str, Any] | None = None  # item_id, output_index, content_index of the text
        self.item_start = 0  # the answer's text length when this item's text began
        self.seen = 0  # the answer's text length so far
        self.sequence = -1
        self.items: dict[int, Any] = {}  # output_index → an item streamed whole (reasoning, a call) before the text

    @property
    def ended(self) -> bool:
        return self.completed is not None

    def read(self, event: dict[str, Any]) -> tuple[str, bool]:
        kind = event.get("type")
        if isinstance(event.get("sequence_number"), int):
            self.sequence = max(self.sequence, event["sequence_number"])
        if kind == "response.created" and isinstance(event.get("response"), dict):
            self.started = event["response"]
        if kind in LAST:
            response = event.get("response")
            self.completed = response if isinstance(response, dict) else {}
        if kind == "response.output_item.done" and isinstance(event.get("item"), dict) and isinstance(event.get("output_index"), int):
            self.items[event["output_index"]] = event["item"]
        if kind != "response.output_text.delta":
            return "", kind in CLOSING
        delta = event.get("delta")
        if not isinstance(delta, str):
            raise TypeError("an output_text delta that is not a string")
        where = {k: event.get(k) for k in ("item_id", "output_index", "content_index")}
        if where != self.where:
            self.where, self.item_start = where, self.seen
        self.seen += len(delta)
        return delta, False

    def blocked_events(self, released: str, remainder: str, notice: str, ending: Any) -> list[bytes]:
        where = self.where or {"item_id": "msg_ctxwarden", "output_index": 0, "content_index": 0}
        text = released[self.item_start:] + remainder + notice
        message = output_message(where["item_id"], text)
        # The items the client saw before the message (reasoning, calls) stay in the completed response
        before = [item for index, item in sorted(self.items.items()) if index < (where["output_index"] or 0)]
        estimate = ending.estimate
        usage = self.started.get("usage") or {"input_tokens": estimate["prompt_tokens"], "output_tokens": estimate["completion_tokens"],
                                              "total_tokens": estimate["total_tokens"], "ctxwarden": "estimated"}
        response = {**self.started, "status": "completed", "output": [*before, message], "error": None, "usage": usage,
                    "incomplete_details": None, "ctxwarden": {"author": "proxy", "reason": "answer_blocked"}}
        self.completed = response  # its usage is what the metrics and a client key's charge read
        numbers = _SEQUENCE.findall(ending.last_released)
        if numbers:  # the next number after the last event that went out (held ones were dropped)
            self.sequence = int(numbers[-1])
        events = [
            {"type": "response.output_text.delta", **where, "delta": remainder + notice, "logprobs": []},
            {"type": "response.output_text.done", **where, "text": text, "logprobs": []},
            {"type": "response.content_part.done", **where, "part": text_part(text)},
            {"type": "response.output_item.done", "output_index": where["output_index"], "item": message},
            {"type": "response.completed", "response": response},
        ]
        return [encode_event({**e, "sequence_number": self.sequence + 1 + n}) for n, e in enumerate(events)]

    def error_event(self, message: str, code: str) -> bytes:
        self.sequence += 1
        return encode_event({"type": "error", "code": code, "message": message, "param": None,
                             "sequence_number": self.sequence})

    def usage(self) -> dict[str, int] | None:
        """In chat's names (prompt/completion tokens), for the GenAI metrics."""
        usage = (self.completed or {}).get("usage")
        if not isinstance(usage, dict):
            return None
        names = {"input_tokens": "prompt_tokens", "output_tokens": "completion_tokens", "total_tokens": "total_tokens"}
        return {ours: usage[theirs] for theirs, ours in names.items() if isinstance(usage.get(theirs), int)}

    def model(self) -> str | None:
        return (self.completed or self.started).get("model")
