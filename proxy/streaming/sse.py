"""Server-sent events: split a byte stream into events, and write events back."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Collection

try:  # a quarter of json.loads' time per chunk; chromadb depends on it, json.loads stands in without it
    from orjson import loads as _fast_loads
except ImportError:  # pragma: no cover
    _fast_loads = json.loads

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


class PassGuard:
    """Pass-through bytes, checked event by event without being re-encoded. Whole events go out as
    soon as they are complete, each as it came (only an event still arriving is held); an event whose
    data is neither JSON nor [DONE] stops the stream: `problem` says why, and nothing from it on goes
    out. With `strip_usage`, the usage-only chunk (`"choices": []` with `usage`), which the proxy
    asked for and the client did not, is left out."""

    def __init__(self, strip_usage: bool = False) -> None:
        self.strip_usage = strip_usage
        self.problem: str | None = None
        self._buf = b""

    def feed(self, chunk: bytes) -> bytes:
        buf = self._buf + chunk if self._buf else chunk
        if b"\r" in buf:
            buf = buf.replace(b"\r\n", b"\n")
        if buf.endswith(b"\n\n"):  # the usual read: whole events
            self._buf = b""
            return self._checked(buf)
        end = buf.rfind(b"\n\n")
        if end < 0:
            self._buf = buf
            return b""
        whole, self._buf = buf[: end + 2], buf[end + 2 :]
        return self._checked(whole)

    def rest(self) -> bytes:
        """What is left when the stream ended (an unterminated last event), checked, as it came."""
        rest, self._buf = self._buf, b""
        return rest if rest and self._checked(rest + b"\n\n") else b""

    def _checked(self, whole: bytes) -> bytes:
        """Whole events (ending in a blank line): all of them as they are, or those before the
        first bad one, without the usage-only chunk when it is stripped."""
        if whole.startswith(b"data:") and whole.count(b"\n") == 2:  # the usual read: one event, one data line
            try:
                _fast_loads(whole[5:-2])
            except ValueError:
                return whole if self._keep_data(whole[5:-2]) else b""
            return whole if not self.strip_usage or b'"usage"' not in whole or self._keep_data(whole[5:-2]) else b""
        events = whole.split(b"\n\n")
        out: list[bytes] | None = None  # None while every event so far goes out
        for n, raw in enumerate(events[:-1]):  # the last piece is the b"" after the final blank line
            keep = self._keep(raw)
            if keep and out is not None:
                out.append(raw + b"\n\n")
            elif not keep and out is None:
                out = [raw + b"\n\n" for raw in events[:n]]
            if self.problem:
                break
        return whole if out is None else b"".join(out)

    def _keep(self, raw: bytes) -> bool:
        if raw.startswith(b"data:") and b"\n" not in raw:  # one data line
            return self._keep_data(raw[5:])
        lines = [line[5:] for line in raw.split(b"\n") if line.startswith(b"data:")]
        if not lines:
            return True  # a comment, a keep-alive, an event or id line alone
        return self._keep_data(b"\n".join(line[1:] if line.startswith(b" ") else line for line in lines))

    def _keep_data(self, data: bytes) -> bool:
        """Whether an event with this data goes out: JSON or [DONE] does (but the usage-only chunk
        when it is stripped); anything else is the stream's `problem`."""
        try:
            obj = _fast_loads(data)
        except ValueError:
            data = data.strip()
            if not data or data == b"[DONE]":
                return True
            text = data.decode("utf-8", "replace")  # as the parsed modes read it (EventSplitter)
            try:
                obj = json.loads(text)  # what orjson refuses and json reads: a lone surrogate's escape, bad UTF-8
            except ValueError:
                self.problem = f"an event's data is not valid JSON: {text[:120]!r}"
                return False
        return not (self.strip_usage and type(obj) is dict and obj.get("choices") == []
                    and isinstance(obj.get("usage"), dict))
