"""A local fake OpenAI-compatible upstream, for the demo, the tests and the benchmarks.

It answers /v1/chat/completions (plain or streamed) and /v1/models, records every request it
receives, and follows a script of canned replies when given one:

    {"content": "text"}                      an answer (streamed in word chunks when asked to stream)
    {"tool_calls": [{"name", "arguments"}]}  an assistant tool call
    {"status": 429, "json": {...}, "headers": {...}}   an error (or any status) with a body
    {"delay_s": 2.0}                         wait before answering (with any of the above)
    {"chunk_delay_s": 0.05}                  wait between streamed chunks
    {"cut_after": 2}                         stream this many chunks, then drop the connection
    {"raw": "text", "content_type": "..."}   a body that is not JSON

A script entry is used once, in order; with an empty script the reply echoes the last user
message. Control it in-process (`FakeUpstream.script`, `.received`) or over HTTP
(POST /_script with a JSON list, GET /_received, POST /_reset).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any, AsyncIterator

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ctxwarden.policies.messages import content_text


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes


@dataclass
class FakeUpstream:
    script: list[dict[str, Any]] = field(default_factory=list)
    received: list[Received] = field(default_factory=list)
    counter: int = 0

    def reply(self, **entry: Any) -> "FakeUpstream":
        self.script.append(entry)
        return self

    def reset(self) -> None:
        self.script.clear()
        self.received.clear()

    @property
    def chat_requests(self) -> list[Any]:
        return [r.body for r in self.received if r.path.endswith("chat/completions")]

    # ------------------------------------------------------------------ the app

    def app(self) -> Starlette:
        return Starlette(routes=[
            Route("/v1/chat/completions", self._chat, methods=["POST"]),
            Route("/v1/models", self._models, methods=["GET"]),
            Route("/v1/embeddings", self._embeddings, methods=["POST"]),
            Route("/_script", self._set_script, methods=["POST"]),
            Route("/_received", self._get_received, methods=["GET"]),
            Route("/_reset", self._reset, methods=["POST"]),
        ])

    async def _record(self, request: Request) -> Any:
        raw = await request.body()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        self.received.append(Received(request.url.path, dict(request.headers), body, raw))
        return body

    async def _chat(self, request: Request) -> Response:
        body = await self._record(request) or {}
        entry = self.script.pop(0) if self.script else {}
        if entry.get("delay_s"):
            await asyncio.sleep(entry["delay_s"])
        status = entry.get("status", 200)
        if "raw" in entry:
            return Response(entry["raw"], status_code=status, media_type=entry.get("content_type", "text/plain"), headers=entry.get("headers"))
        if status != 200 or "json" in entry:
            return JSONResponse(entry.get("json", {}), status_code=status, headers=entry.get("headers"))
        self.counter += 1
        model = body.get("model", "fake-model")
        calls = [
            {"id": c.get("id", f"call_{self.counter}_{i}"), "type": "function",
             "function": {"name": c["name"], "arguments": c.get("arguments", "{}")}}
            for i, c in enumerate(entry.get("tool_calls") or [])
        ]
        content = entry.get("content")
        if content is None and not calls:
            last_user = next((m for m in reversed(body.get("messages", [])) if m.get("role") == "user"), {})
            content = f"You said: {content_text(last_user)}"
        usage = {"prompt_tokens": 10, "completion_tokens": max(1, len((content or "").split())), "total_tokens": 0}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return StreamingResponse(
                self._stream(model, content, calls, usage if include_usage else None, entry),
                media_type="text/event-stream",
            )
        message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
        if calls:
            message["tool_calls"] = calls
        return JSONResponse({
            "id": f"chatcmpl-fake{self.counter}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": usage,
            "system_fingerprint": "fp_fake",
        })

    async def _stream(self, model: str, content: str | None, calls: list, usage: dict | None, entry: dict) -> AsyncIterator[bytes]:
        base = {"id": f"chatcmpl-fake{self.counter}", "object": "chat.completion.chunk", "created": int(time.time()),
                "model": model, "system_fingerprint": "fp_fake"}

        def chunk(delta: dict, finish: str | None = None, **extra: Any) -> bytes:
            obj = {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}], **extra}
            return b"data: " + json.dumps(obj).encode() + b"\n\n"

        pieces = [chunk({"role": "assistant", "content": ""})]
        if content:
            words = content.split(" ")
            pieces += [chunk({"content": w if i == 0 else " " + w}) for i, w in enumerate(words)]
        for i, call in enumerate(calls):
            pieces.append(chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                                 "function": {"name": call["function"]["name"], "arguments": ""}}]}))
            pieces.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": call["function"]["arguments"]}}]}))
        pieces.append(chunk({}, "tool_calls" if calls else "stop"))
        if usage:
            pieces.append(b"data: " + json.dumps({**base, "choices": [], "usage": usage}).encode() + b"\n\n")
        pieces.append(b"data: [DONE]\n\n")
        cut_after = entry.get("cut_after")
        for i, piece in enumerate(pieces):
            if cut_after is not None and i >= cut_after:
                raise ConnectionResetError("fake upstream cut the stream")  # uvicorn drops the connection
            yield piece
            if entry.get("chunk_delay_s"):
                await asyncio.sleep(entry["chunk_delay_s"])

    async def _models(self, request: Request) -> Response:
        await self._record(request)
        return JSONResponse({"object": "list", "data": [
            {"id": "gpt-4o", "object": "model", "created": 0, "owned_by": "fake"},
            {"id": "gpt-4o-mini", "object": "model", "created": 0, "owned_by": "fake"},
        ]})

    async def _embeddings(self, request: Request) -> Response:
        body = await self._record(request) or {}
        inputs = body.get("input") or []
        inputs = [inputs] if isinstance(inputs, str) else inputs
        return JSONResponse({"object": "list", "model": body.get("model"), "data": [
            {"object": "embedding", "index": i, "embedding": [float(len(t) % 7), 1.0, 0.5]} for i, t in enumerate(inputs)
        ], "usage": {"prompt_tokens": 0, "total_tokens": 0}})

    async def _set_script(self, request: Request) -> Response:
        entries = json.loads(await request.body() or b"[]")
        self.script.extend(entries if isinstance(entries, list) else [entries])
        return JSONResponse({"queued": len(self.script)})

    async def _get_received(self, request: Request) -> Response:
        return JSONResponse([{"path": r.path, "body": r.body} for r in self.received])

    async def _reset(self, request: Request) -> Response:
        self.reset()
        return JSONResponse({"ok": True})


def main() -> None:
    """`python -m proxy.fake_upstream --port N`: serve the fake upstream on 127.0.0.1."""
    import argparse

    import uvicorn

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--port", type=int, default=8788)
    args = parser.parse_args()
    uvicorn.run(FakeUpstream().app(), host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
