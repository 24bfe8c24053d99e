"""Answers the proxy writes itself (a Respond verdict), in the chat completions shape, and the
client's leaving, which the handler watches while the policies work."""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request

from ctxwarden.policies.base import Exchange

from .streaming import sse

# An answer whose text the proxy replaced with its notice (poisoning's block) says so in its metadata
# too, on every API, plain or streamed: a top-level "ctxwarden" field (on the notice's chunk in a stream).
BLOCKED_MARK = {"author": "proxy", "reason": "answer_blocked"}
COUNTED_PROMPT = "proxy_counted_prompt_tokens"  # RequestNotes.usage: the proxy's count of the prompt it forwarded


def estimated_usage(ex: Exchange, streamed_text: str) -> dict[str, Any]:
    """Usage for a stream a block ended before the upstream reported its own (that comes last, and
    waiting for it would pay for the rest of a blocked answer): the proxy's count of the prompt and
    ~4 characters a token of what was streamed, marked as the proxy's estimate. Charged to a client
    key as the upstream's would be."""
    prompt = int(ex.notes.usage.get(COUNTED_PROMPT, 0))
    completion = (len(streamed_text) + 3) // 4
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "ctxwarden": "estimated"}


def completion_object(ex: Exchange, content: str, finish_reason: str = "stop", reason: str = "") -> dict[str, Any]:
    """An answer the proxy wrote, marked by a top-level "ctxwarden" field (SDKs keep unknown fields)."""
    return {
        "id": f"chatcmpl-{ex.request_id}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": ex.model,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content, "refusal": None},
            "logprobs": None,
            "finish_reason": finish_reason,
        }],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        "ctxwarden": {"author": "proxy", "reason": reason},
    }


def completion_chunks(ex: Exchange, content: str, finish_reason: str = "stop", reason: str = "") -> list[bytes]:
    """The same answer as SSE chunks; the first one carries the "ctxwarden" mark."""
    base = {"id": f"chatcmpl-{ex.request_id}", "object": "chat.completion.chunk", "created": int(time.time()), "model": ex.model}
    chunks = [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": content}, "logprobs": None, "finish_reason": None}],
         "ctxwarden": {"author": "proxy", "reason": reason}},
        {**base, "choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": finish_reason}]},
    ]
    options = ex.body.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage") is True:
        chunks.append({**base, "choices": [], "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}})
    return [sse.encode(c) for c in chunks] + [sse.DONE]


async def disconnected(request: Request) -> None:
    """Returns when the client disconnects (the body is read already: the server's next message is
    the disconnect)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass
