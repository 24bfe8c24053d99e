"""Server-sent events: split a byte stream into events, and write events back."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Collection

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


def without_choices(raw: bytes, drop: Collection[int]) -> bytes | None:
    """The chunk event with the choices of these indexes left out; None when nothing is left in it."""
    event = next(iter(EventSplitter().feed(raw)), None)
    obj = event.json() if event else None
    if not isinstance(obj, dict) or not isinstance(obj.get("choices"), list):
        return raw
    kept = [c for c in obj["choices"] if c.get("index", 0) not in drop]
    if len(kept) == len(obj["choices"]):
        return raw
    if not kept and not obj.get("usage"):
        return None
    return encode({**obj, "choices": kept})


def chunk_problem(obj: Any) -> str | None:
    """What keeps a parsed event from being a chat-completion chunk the relay can read; None if nothing."""
    choices = obj.get("choices")
    if not isinstance(choices, list):
        return "its 'choices' is not a list"
    for choice in choices:
        if not isinstance(choice, dict) or not isinstance(choice.get("delta") or {}, dict):
            return "a choice or its 'delta' is not an object"
        if not isinstance(choice.get("index", 0), int):
            return "a choice's 'index' is not an integer"
        delta = choice.get("delta") or {}
        if not isinstance(delta.get("content") or "", str) or not isinstance(delta.get("tool_calls") or [], list):
            return "a delta's 'content' is not a string or its 'tool_calls' not a list"
    return None


class UsageStripper:
    """Pass-through bytes minus the usage-only chunk (`"choices": []` with `usage`), for a stream
    whose usage the proxy asked for and the client did not. Whole events go out as soon as they are
    complete; only an event still arriving is held."""

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, chunk: bytes) -> bytes:
        buf = self._buf + chunk
        if b"\r" in buf:
            buf = buf.replace(b"\r\n", b"\n")
        end = buf.rfind(b"\n\n")
        if end < 0:
            self._buf = buf
            return b""
        whole, self._buf = buf[: end + 2], buf[end + 2 :]
        if b'"usage"' not in whole:  # no usage chunk among them: out unparsed (this runs on every chunk)
            return whole
        # Only an event naming "usage" is parsed; the rest go out as they came.
        events = [raw + b"\n\n" for raw in whole[:-2].split(b"\n\n")]
        return b"".join(raw for raw in events if b'"usage"' not in raw or not _usage_only_raw(raw))

    def rest(self) -> bytes:
        """What is left when the stream ends (an unterminated last event), as it came."""
        return self._buf


def _usage_only_raw(raw: bytes) -> bool:
    event = next(iter(EventSplitter().feed(raw)), None)
    return event is not None and _usage_only(event)


def _usage_only(event: Event) -> bool:
    if b'"usage"' not in event.raw:
        return False
    obj = event.json()
    return isinstance(obj, dict) and obj.get("choices") == [] and isinstance(obj.get("usage"), dict)
