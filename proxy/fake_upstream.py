"""A local fake OpenAI-compatible upstream, for the demo, the tests and the benchmarks.

It answers /v1/chat/completions and /v1/responses (plain or streamed) and /v1/models, records
every request it receives, and follows a script of canned replies when given one:

    {"content": "text"}                      an answer (streamed in word chunks when asked to stream)
    {"tool_calls": [{"name", "arguments"}]}  an assistant tool call
    {"status": 429, "json": {...}, "headers": {...}}   an error (or any status) with a body
    {"delay_s": 2.0}                         wait before answering (with any of the above)
    {"chunk_delay_s": 0.05}                  wait between streamed chunks
    {"cut_after": 2}                         stream this many chunks (events), then drop the connection
    {"garble_after": 2}                      stream this many chunks (events), then one that is not JSON
    {"raw": "text", "content_type": "..."}   a body that is not JSON
    {"choices": ["text 0", "text 1"]}        n answers (streamed interleaved, one choice per chunk)

A script entry is used once, in order; with an empty script the reply echoes the last user
message. Control it in-process (`FakeUpstream.script`, `.received`) or over HTTP
(POST /_script with a JSON list, GET /_received, POST /_reset). `.paths` lists the raw target of
every request that reached it, routed or not.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any, AsyncIterator

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ctxwarden.policies.messages import content_text

from .wire.anthropic_stream import message_events
from .wire.responses import output_message
from .fake_stored import stored_routes
from .wire.responses_stream import encode_event, response_events


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
    paths: list[str] = field(default_factory=list)  # raw request targets (path?query), as they arrived
    counter: int = 0
    stored: dict[str, Any] = field(default_factory=dict)  # Responses (store: true), conversations, files, … by id
    contents: dict[str, bytes] = field(default_factory=dict)  # a stored file's bytes (fake_stored.py)

    def reply(self, **entry: Any) -> "FakeUpstream":
        self.script.append(entry)
        return self

    def reset(self) -> None:
        self.script.clear()
        self.received.clear()
        self.paths.clear()

    @property
    def chat_requests(self) -> list[Any]:
        return [r.body for r in self.received if r.path.endswith("chat/completions")]

    @property
    def messages_requests(self) -> list[Any]:
        return [r.body for r in self.received if r.path.endswith("/messages")]

    @property
    def responses_requests(self) -> list[Any]:
        return [r.body for r in self.received if r.path.endswith("/responses")]

    # ------------------------------------------------------------------ the app

    def app(self) -> Starlette:
        return Starlette(routes=[
            Route("/v1/chat/completions", self._chat, methods=["POST"]),
            Route("/v1/responses", self._responses, methods=["POST"]),
            Route("/v1/responses/{object_id}", self._stored_object, methods=["GET", "DELETE"]),
            Route("/v1/conversations", self._new_conversation, methods=["POST"]),
            Route("/v1/conversations/{object_id}", self._stored_object, methods=["GET", "DELETE"]),
            Route("/v1/messages", self._messages, methods=["POST"]),
            Route("/v1/messages/{path:path}", self._not_found, methods=["GET", "POST", "DELETE"]),  # recorded
            Route("/v1/models", self._models, methods=["GET"]),
            Route("/v1/embeddings", self._embeddings, methods=["POST"]),
            *stored_routes(self),
            Route("/_script", self._set_script, methods=["POST"]),
            Route("/_received", self._get_received, methods=["GET"]),
            Route("/_reset", self._reset, methods=["POST"]),
        ], middleware=[Middleware(_PathRecorder, sink=self.paths)])

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
        texts: list[str | None] = list(entry["choices"]) if entry.get("choices") else [content]
        words = sum(len((t or "").split()) for t in texts)
        usage = {"prompt_tokens": 10, "completion_tokens": max(1, words), "total_tokens": 10 + max(1, words)}
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return StreamingResponse(
                self._stream(model, texts, calls, usage if include_usage else None, entry),
                media_type="text/event-stream",
            )
        choices = []
        for i, text in enumerate(texts):
            message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
            if calls and i == 0:
                message["tool_calls"] = calls
            choices.append({"index": i, "message": message, "logprobs": None,
                            "finish_reason": "tool_calls" if calls and i == 0 else "stop"})
        return JSONResponse({
            "id": f"chatcmpl-fake{self.counter}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": choices,
            "usage": usage,
            "system_fingerprint": "fp_fake",
        })

    async def _stream(self, model: str, texts: list, calls: list, usage: dict | None, entry: dict) -> AsyncIterator[bytes]:
        base = {"id": f"chatcmpl-fake{self.counter}", "object": "chat.completion.chunk", "created": int(time.time()),
                "model": model, "system_fingerprint": "fp_fake"}

        def chunk(delta: dict, finish: str | None = None, index: int = 0) -> bytes:
            obj = {**base, "choices": [{"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}]}
            return b"data: " + json.dumps(obj).encode() + b"\n\n"

        pieces = [chunk({"role": "assistant", "content": ""}, index=n) for n in range(len(texts))]
        words = [(t or "").split(" ") if t else [] for t in texts]
        for i in range(max(map(len, words), default=0)):  # one word of each choice in turn
            pieces += [chunk({"content": w[i] if i == 0 else " " + w[i]}, index=n) for n, w in enumerate(words) if i < len(w)]
        for i, call in enumerate(calls):
            pieces.append(chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                                 "function": {"name": call["function"]["name"], "arguments": ""}}]}))
            pieces.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": call["function"]["arguments"]}}]}))
        pieces += [chunk({}, "tool_calls" if calls and n == 0 else "stop", index=n) for n in range(len(texts))]
        if usage:
            pieces.append(b"data: " + json.dumps({**base, "choices": [], "usage": usage}).encode() + b"\n\n")
        pieces.append(b"data: [DONE]\n\n")
        async for piece in _scripted_stream(pieces, entry):
            yield piece

    async def _next_entry(self, request: Request) -> tuple[dict[str, Any], dict[str, Any], Response | None]:
        """(the body, the next script entry, the error answer it scripts or None), after its delay."""
        body = await self._record(request) or {}
        entry = self.script.pop(0) if self.script else {}
        if entry.get("delay_s"):
            await asyncio.sleep(entry["delay_s"])
        status = entry.get("status", 200)
        if status != 200 or "json" in entry:
            return body, entry, JSONResponse(entry.get("json", {}), status_code=status, headers=entry.get("headers"))
        self.counter += 1
        return body, entry, None

    async def _responses(self, request: Request) -> Response:
        """The Responses API: the same script entries as chat (content, tool_calls, status/json, delay_s)."""
        body, entry, scripted = await self._next_entry(request)
        if scripted is not None:
            return scripted
        n = self.counter
        output: list[dict[str, Any]] = []
        content = entry.get("content")
        if content is None and not entry.get("tool_calls"):
            content = f"You said: {_last_user_input(body.get('input'))}"
        if content is not None:
            output.append(output_message(f"msg_fake{n}", content))
        output += [{"type": "function_call", "id": f"fc_fake{n}_{i}", "call_id": c.get("id", f"call_{n}_{i}"),
                    "name": c["name"], "arguments": c.get("arguments", "{}"), "status": "completed"}
                   for i, c in enumerate(entry.get("tool_calls") or [])]
        words = max(1, len((content or "").split()))
        response = {
            "id": f"resp_fake{n}", "object": "response", "created_at": int(time.time()), "status": "completed",
            "error": None, "incomplete_details": None, "instructions": body.get("instructions"),
            "model": body.get("model", "fake-model"), "output": output, "parallel_tool_calls": True,
            "previous_response_id": body.get("previous_response_id"), "store": bool(body.get("store", True)),
            "temperature": None, "text": {"format": {"type": "text"}}, "tool_choice": body.get("tool_choice", "auto"),
            "tools": body.get("tools") or [], "top_p": None, "truncation": "disabled", "metadata": {},
            "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": words,
                      "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 10 + words},
        }
        if response["store"]:
            self.stored[response["id"]] = response
        if not body.get("stream"):
            return JSONResponse(response)

        events: list[dict[str, Any]] = []
        for event in response_events(response):  # text in word deltas, as a model streams it
            if event["type"] == "response.output_text.delta":
                events += [{**event, "delta": word} for word in _words(event["delta"])]
            else:
                events.append(event)
        pieces = [encode_event({**e, "sequence_number": n}) for n, e in enumerate(events)]
        return StreamingResponse(_scripted_stream(pieces, entry), media_type="text/event-stream")

    async def _messages(self, request: Request) -> Response:
        """Anthropic's Messages API: the same script entries (content, tool_calls, status/json, delay_s)."""
        body, entry, scripted = await self._next_entry(request)
        if scripted is not None:
            return scripted
        n = self.counter
        content = entry.get("content")
        if content is None and not entry.get("tool_calls"):
            last = next((m for m in reversed(body.get("messages") or []) if m.get("role") == "user"), {})
            said = last.get("content")
            said_blocks = said if isinstance(said, list) else []
            said = said if isinstance(said, str) else "\n".join(str(b.get("text", "")) for b in said_blocks
                                                                if isinstance(b, dict) and b.get("type") == "text")
            content = f"You said: {said}"
        blocks: list[dict[str, Any]] = [{"type": "text", "text": content}] if content is not None else []
        blocks += [{"type": "tool_use", "id": c.get("id", f"toolu_{n}_{i}"), "name": c["name"],
                    "input": json.loads(c.get("arguments", "{}"))} for i, c in enumerate(entry.get("tool_calls") or [])]
        words = max(1, len((content or "").split()))
        message = {"id": f"msg_fake{n}", "type": "message", "role": "assistant", "model": body.get("model", "fake-model"),
                   "content": blocks, "stop_reason": "tool_use" if entry.get("tool_calls") else "end_turn",
                   "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": words}}
        if not body.get("stream"):
            return JSONResponse(message)

        pieces = []
        for name, data in message_events(message):  # text in word deltas, as a model streams it
            texts = _words(data["delta"]["text"]) if data.get("delta", {}).get("type") == "text_delta" else [None]
            for text in texts:
                event = data if text is None else {**data, "delta": {"type": "text_delta", "text": text}}
                pieces.append(f"event: {name}\ndata: {json.dumps(event)}\n\n".encode())
        return StreamingResponse(_scripted_stream(pieces, entry), media_type="text/event-stream")

    async def _stored_object(self, request: Request) -> Response:
        """A stored Response or conversation, read or deleted by id (OpenAI's 404 shape when unknown)."""
        await self._record(request)
        object_id = request.path_params["object_id"]
        if object_id not in self.stored:
            return JSONResponse({"error": {"message": f"No object with id '{object_id}' found.", "type": "invalid_request_error",
                                           "param": None, "code": None}}, status_code=404)
        if request.method == "DELETE":
            return JSONResponse({"id": object_id, "object": f"{self.stored.pop(object_id)['object']}.deleted", "deleted": True})
        return JSONResponse(self.stored[object_id])

    async def _new_conversation(self, request: Request) -> Response:
        body = await self._record(request) or {}
        self.counter += 1
        conversation = {"id": f"conv_fake{self.counter}", "object": "conversation", "created_at": int(time.time()),
                        "metadata": body.get("metadata") or {}}
        self.stored[conversation["id"]] = conversation
        return JSONResponse(conversation)

    async def _not_found(self, request: Request) -> Response:
        await self._record(request)
        return JSONResponse({"type": "error", "error": {"type": "not_found_error", "message": "no such route here"}},
                            status_code=404)

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


def _words(text: str) -> list[str]:
    """A text as a model streams it: word by word, each word after the first with its space."""
    words = text.split(" ")
    return [w if i == 0 else " " + w for i, w in enumerate(words)] if text else [""]


async def _scripted_stream(pieces: list[bytes], entry: dict[str, Any]) -> AsyncIterator[bytes]:
    """Typed events as the script says: a delay between them, a cut, a garbled event."""
    for i, piece in enumerate(pieces):
        if entry.get("cut_after") is not None and i >= entry["cut_after"]:
            raise ConnectionResetError("fake upstream cut the stream")  # uvicorn drops the connection
        if entry.get("garble_after") is not None and i == entry["garble_after"]:
            yield b"event: response.output_text.delta\ndata: {this is not json\n\n"
        yield piece
        if entry.get("chunk_delay_s"):
            await asyncio.sleep(entry["chunk_delay_s"])


def _last_user_input(value: Any) -> str:
    """The text of the last user message of a Responses `input` (a string, or items)."""
    if isinstance(value, str):
        return value
    for item in reversed(value if isinstance(value, list) else []):
        if isinstance(item, dict) and item.get("role") == "user":
            content = item.get("content")
            if isinstance(content, str):
                return content
            parts = content if isinstance(content, list) else []
            return "\n".join(str(p["text"]) for p in parts if isinstance(p, dict) and "text" in p)
    return ""


class _PathRecorder:
    """ASGI middleware: note the raw path of every HTTP request, before any routing."""

    def __init__(self, app: Any, sink: list[str]) -> None:
        self.app = app
        self.sink = sink

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            raw = scope.get("raw_path") or scope["path"].encode()
            query = scope.get("query_string") or b""
            self.sink.append((raw + b"?" + query if query else raw).decode("latin-1"))
        await self.app(scope, receive, send)


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
