"""Server-sent events: split a byte stream into events, and write events back."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

DONE = b"data: [DONE]\n\n"


@dataclass
class Event:
    raw: bytes  # the event exactly as received, with its blank-line terminator
    data: str  # the joined data lines

    @property
    def is_done(self) -> bool:
        return self.data.strip() == "[DONE]"

    def json(self) -> Any:
        try:
            return json.loads(self.data)
        except ValueError:
            return None


class EventSplitter:
    """Feed bytes as they arrive; get back the complete events."""

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, chunk: bytes) -> list[Event]:
        self._buf += chunk
        if b"\r" in self._buf:
            self._buf = self._buf.replace(b"\r\n", b"\n")
        events: list[Event] = []
        while True:
            end = self._buf.find(b"\n\n")
            if end < 0:
                return events
            raw, self._buf = self._buf[: end + 2], self._buf[end + 2 :]
            data = [line[5:].lstrip(b" ") if line.startswith(b"data:") else None for line in raw.split(b"\n")]
            payload = b"\n".join(d for d in data if d is not None)
            if any(d is not None for d in data):
                events.append(Event(raw, payload.decode("utf-8", errors="replace")))
            elif raw.strip():
                events.append(Event(raw, ""))  # comments / keep-alives pass through as they are

    @property
    def pending(self) -> bytes:
        return self._buf


def encode(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n\n"


def error_event(message: str, code: str, type: str = "server_error") -> bytes:
    """An in-stream error: the OpenAI SDKs raise APIError when a data event carries `error`."""
    return encode({"error": {"message": message, "type": type, "code": code, "param": None}})
