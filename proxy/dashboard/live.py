"""GET /admin/stats/stream?window=1h: the dashboard's figures as server-sent events.

An event (`data: <the /admin/stats JSON>`) at once, then after each flush of the aggregates and at
least every TICK_S, when the figures changed; otherwise a `: keep-alive` comment. A stream ends
after STREAM_MAX_S (the browser's EventSource reconnects by itself, after `retry`), so a server
shutting down never waits on an open dashboard for longer than that, and when the admin key
stops matching (the reconnection then gets the 401).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any, AsyncIterator, Awaitable, Callable

log = logging.getLogger("ctxwarden.dashboard")

TICK_S = 2.0
STREAM_MAX_S = 15.0
RETRY_MS = 1000
HEADERS = {"cache-control": "no-store", "x-accel-buffering": "no", "x-content-type-options": "nosniff"}


class Flushes:
    """Wakes every open stream when the aggregates were flushed."""

    def __init__(self) -> None:
        self._changed: asyncio.Condition | None = None

    def _condition(self) -> asyncio.Condition:
        if self._changed is None:
            self._changed = asyncio.Condition()
        return self._changed

    async def notify(self) -> None:
        condition = self._condition()
        async with condition:
            condition.notify_all()

    async def wait(self, timeout_s: float) -> None:
        """Until the next flush, or `timeout_s`."""
        condition = self._condition()
        async with condition:
            try:
                await asyncio.wait_for(condition.wait(), timeout_s)
            except asyncio.TimeoutError:
                pass


# Read afresh each time the figures are built: they alone are not a change worth an event (RSS moves
# by pages between two ticks); each event carries them as they are when it is sent.
_READINGS = {"generated_at": None, "memory": None}


def _same(a: dict[str, Any] | None, b: dict[str, Any]) -> bool:
    return a is not None and {**a, **_READINGS} == {**b, **_READINGS}


async def events(figures: Callable[[], Awaitable[dict[str, Any]]], flushes: Flushes,
                 allowed: Callable[[], bool], max_s: float | None = None) -> AsyncIterator[str]:
    """The text of the stream: figures when they changed, keep-alive comments otherwise."""
    yield f"retry: {RETRY_MS}\n: connected\n\n"
    sent: dict[str, Any] | None = None
    ends = time.monotonic() + (STREAM_MAX_S if max_s is None else max_s)
    while True:
        try:
            data = await figures()
        except Exception as exc:  # the store is down: keep the connection, say why in a comment
            log.warning("dashboard stream: figures unavailable: %s: %s", type(exc).__name__, exc)
            yield f": keep-alive (figures unavailable: {type(exc).__name__})\n\n"
        else:
            if _same(sent, data):
                yield ": keep-alive\n\n"
            else:
                sent = data
                yield f"data: {json.dumps(data, separators=(',', ':'))}\n\n"
        if time.monotonic() >= ends:
            return
        await flushes.wait(min(TICK_S, max(0.0, ends - time.monotonic())))
        if not allowed():
            return
