"""A streamed Responses or Messages answer relayed through the answer checker's gate.

Used by both typed-event handlers when a stream validator reads the answer (a knowledge base to
check against): the text still arrives sentence by sentence as the upstream streams it, and a
contradicted sentence never reaches the client (action `proxy.stream_gated`, outcome `blocked`).
"""

from __future__ import annotations

from typing import AsyncIterator, Callable

import httpx
from starlette.responses import StreamingResponse

from ctxwarden.policies.base import Exchange

from .upstream_answer import relay_headers
from .genai import UpstreamCall
from .pipeline import Pipeline
from .streaming.gate import TextGate
from .streaming.sse import PassGuard
from .streaming.typed import Dialect, TypedRelay


def gated_stream(pipeline: Pipeline, ex: Exchange, response: httpx.Response, call: UpstreamCall, dialect: Dialect) -> StreamingResponse:
    """The upstream's stream through a TextGate; `dialect` reads the API's events (and its usage)."""
    gate = TextGate(ex, pipeline.run_response, pipeline.stream_releasable)
    relay = TypedRelay(gate, dialect)
    ex.record("proxy", "stream_gated")

    async def body() -> AsyncIterator[bytes]:
        try:
            async for out in relay.relay(response):
                yield out
        finally:
            call.finish(response.status_code, dialect.usage(), dialect.model(),
                        error=None if dialect.ended or relay.outcome == "blocked" else "upstream_stream_cut")
            await pipeline.complete(ex, relay.outcome)

    headers = relay_headers(response)
    headers["cache-control"] = "no-cache"
    return StreamingResponse(body(), status_code=response.status_code, headers=headers, media_type="text/event-stream")


async def checked_bytes(response: httpx.Response, call: UpstreamCall, dialect: Dialect,
                        watch: Callable[[bytes], None]) -> AsyncIterator[bytes]:
    """A pass-through stream's bytes as they arrive (each chunk shown to `watch` first, for usage),
    whole events only; an event that is not JSON ends it with the API's error event instead."""
    guard = PassGuard()
    async for chunk in response.aiter_bytes():
        watch(chunk)
        out = guard.feed(chunk)
        if guard.problem:
            call.finish(response.status_code, error="upstream_invalid_stream")
            yield out + dialect.error_event(f"The upstream sent a stream ctxwarden cannot read: {guard.problem}",
                                            "upstream_invalid_stream")
            return
        if out:
            yield out
    rest = guard.rest()
    if rest and not guard.problem:
        yield rest
