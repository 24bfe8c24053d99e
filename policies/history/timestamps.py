"""When was a message written? From the message itself or the client's `x-ctxwarden-timestamps` hint.

Chat messages carry no time in OpenAI's format; clients that want age-based trimming send it
either inside each message (`timestamp`, `created_at`, or `metadata.timestamp`; unix seconds,
milliseconds or ISO 8601) or as the header `x-ctxwarden-timestamps`: one entry per message of the
request, in order, as a JSON list or comma-separated (empty or null = unknown). Without any,
age is unknown and nothing is trimmed by age.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any, Sequence

from ..messages import Message, message_values

HEADER = "x-ctxwarden-timestamps"
_KEYS = ("timestamp", "created_at", "created")


def parse_time(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value) / 1000 if value > 1e12 else float(value)
    if isinstance(value, str):
        text = value.strip()
        if not text or text.lower() == "null":
            return None
        try:
            return parse_time(float(text))
        except ValueError:
            pass
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        return moment.timestamp()
    return None


def message_time(message: Message) -> float | None:
    for key in _KEYS:
        if key in message:
            found = parse_time(message[key])
            if found is not None:
                return found
    meta = message.get("metadata")
    if isinstance(meta, dict):
        for key in _KEYS:
            found = parse_time(meta.get(key))
            if found is not None:
                return found
    return None


def header_times(raw: str | None) -> list[float | None] | None:
    if not raw:
        return None
    try:
        values = json.loads(raw)
    except ValueError:
        values = raw.split(",")
    if not isinstance(values, list):
        return None
    return [parse_time(v) for v in values]


def message_times(messages: Sequence[Message], original: Sequence[Message], headers: dict[str, str]) -> list[float | None]:
    """A time (or None) per message; header entries follow the client's original message order."""
    hinted = header_times(headers.get(HEADER))
    own = message_values("history.time", messages, message_time)  # carried for the request's own messages
    if not hinted:
        return list(own)
    by_identity: dict[int, float | None] = {}
    for msg, moment in zip(original, hinted):
        by_identity[id(msg)] = moment
    return [moment if moment is not None else by_identity.get(id(msg)) for msg, moment in zip(messages, own)]
