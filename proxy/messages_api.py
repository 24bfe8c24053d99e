"""POST /v1/messages: Anthropic's Messages API through the same policies as chat completions.

The request is parsed into the chat-shaped conversation the policies read (wire/anthropic.py) and
the edited conversation is written back as Messages: unchanged turns go back as their original
blocks, so `cache_control` breakpoints and thinking signatures arrive byte for byte, and a request
no policy changed is forwarded as the client's bytes. Where it goes (`upstream.anthropic`):

- natively, to Anthropic's API (or any server speaking it), with the proxy's Anthropic key in
  `x-api-key` (without one, the client's passes through; the proxy's OpenAI key never goes there);
- translated (`base_url: null`): the conversation goes to the main upstream as chat completions (or,
  for a provider-prefixed model such as `gemini/…`, through litellm, as on chat) and the answer
  comes back as a Message.

Streams pass through event by event; with a knowledge base to check against, the text goes out
sentence by sentence as each is judged (action `proxy.stream_gated`). Where the proxy must see the
whole answer first (its own tools' rounds, a translated answer), the whole answer comes as the
same events (action `proxy.stream_whole`). Errors are in Anthropic's shape.
"""

from __future__ import annotations

import json
from typing import Any, AsyncIterator

import httpx
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from ctxwarden.policies.base import Answer, Block, Exchange, Reject, Respond
from ctxwarden.policies.messages import content_text

from .answers import BLOCKED_MARK
from .chat import ChatHandler
from .upstream_answer import encode_json, relay_headers, upstream_error
from .errors import ProxyError
from .genai import UpstreamCall, chat_usage, model_of, provider_name, usage_of
from .keys.middleware import charge_of
from .keys.relayed import check_relayed
from .models import uses_litellm
from .proxy_tools import ProxyToolRounds, add_usage
from .typed_streams import checked_bytes, gated_stream
from .upstream.client import AnthropicUpstream, check_answer_bytes, completion_json
from .upstream.paths import relay_path
from .validation import parse_json_body
from .wire.anthropic import (
    PROVIDER_KEY,
    THINKING_KEY,
    UNCHANGED,
    AnthropicWireError,
    answer_as_chat,
    answer_text,
    error_body,
    parse_request,
    proxy_response,
    proxy_stream_events,
    render_request,
    render_tools,
    replace_answer,
    tool_uses_in_answer,
)
from .wire.anthropic_gate import MessagesDialect
from .wire.anthropic_stream import MessageStreamWatch, encode, message_events

STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens", "content_filter": "refusal"}


class MessagesHandler(ChatHandler):
    """The chat handler's path (policies, spans, metrics, headers), in the Messages API's shape."""

    api = "messages"
    needs = "`model`, `max_tokens` and `messages`"

    def __init__(self, *args: Any, anthropic: AnthropicUpstream | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.anthropic = anthropic  # None: translated to chat completions on the main upstream

    def _error(self, exc: ProxyError) -> Response:
        body = exc.relayed if exc.relayed and exc.relayed.get("type") == "error" else error_body(exc.status, None, exc.message)
        return JSONResponse(body, status_code=exc.status, headers=exc.headers)

    def _exchange(self, request_id: str, body: dict[str, Any], headers: Any, body_bytes: int, started: float) -> Exchange:
        if not isinstance(body, dict) or not isinstance(body.get("model"), str) or not body["model"]:
            raise ProxyError(400, "invalid_request", "model: a JSON object with a `model` string is required", param="model")
        if not isinstance(body.get("max_tokens"), int) or isinstance(body.get("max_tokens"), bool):
            raise ProxyError(400, "invalid_request", "max_tokens: an integer is required", param="max_tokens")
        if body.get("stream") is not None and not isinstance(body["stream"], bool):
            raise ProxyError(400, "invalid_request", "stream: a boolean is required", param="stream")
        try:
            parsed = parse_request(body)
        except AnthropicWireError as exc:
            raise ProxyError(400, "invalid_request", str(exc)) from exc
        chat: dict[str, Any] = {"model": body["model"], "messages": parsed.messages, "stream": bool(body.get("stream")),
                                "max_tokens": body["max_tokens"]}
        if parsed.tools:
            chat["tools"] = parsed.tools
        if parsed.tool_choice is not None:
            chat["tool_choice"] = parsed.tool_choice
        for ours, theirs in (("temperature", "temperature"), ("top_p", "top_p"), ("stop", "stop_sequences")):
            if body.get(theirs) is not None:
                chat[ours] = body[theirs]
        user = (body.get("metadata") or {}).get("user_id") if isinstance(body.get("metadata"), dict) else None
        if isinstance(user, str) and user:
            chat["user"] = user
        return self._new_exchange(request_id, chat, headers, body_bytes, started, wire=(body, parsed),
                                  upstream=self.anthropic)

    def _proxy_answer(self, ex: Exchange, verdict: Respond) -> Response:
        if ex.stream:
            events = proxy_stream_events(ex.model, ex.request_id, verdict.content, verdict.reason)
            return StreamingResponse(iter([encode(e) for e in events]), media_type="text/event-stream")
        return JSONResponse(proxy_response(ex.model, ex.request_id, verdict.content, verdict.reason))

    async def _handle(self, ex: Exchange, raw: bytes, request: Request, span: Any) -> Response:
        ended = await self._policies(ex, request)
        if ended is not None:
            return ended
        self._record_tokens(ex, span)
        self._watch_prefix(ex, ex.outgoing_body(), span)
        upstream = self.anthropic or self.upstream
        provider = "anthropic" if self.anthropic else provider_name(ex.model, uses_litellm(ex.model))
        call = UpstreamCall(self.telemetry, ex.model, provider, upstream.base_url, tally=ex.notes.usage)
        try:
            if self.anthropic is None:
                return await self._translated(ex, call)
            return await self._native(ex, raw, call)
        except BaseException as exc:
            call.finish(getattr(exc, "status", None), error=getattr(exc, "code", None) or type(exc).__name__)
            raise

    # ------------------------------------------------------------------ Anthropic's API

    async def _native(self, ex: Exchange, raw: bytes, call: UpstreamCall) -> Response:
        assert self.anthropic is not None
        body, parsed = ex.notes.wire
        outgoing = body
        if ex.changed or ex.proxy_tools:
            outgoing = render_request(body, parsed, ex.messages, ex.forwarded_tools())
        if ex.stream and not ex.proxy_tools:
            response = await self._post_native(ex, raw if outgoing is body else encode_json(outgoing), stream=True)
            if response.status_code >= 400:
                return await self._upstream_failed(ex, response, call)
            if self.pipeline.reads_answer(ex, self.pipeline.stream_validators):
                return gated_stream(self.pipeline, ex, response, call, MessagesDialect())
            return self._passthrough(ex, response, call)
        if ex.stream:
            ex.record("proxy", "stream_whole", reason="proxy_tools")
            outgoing = {**outgoing, "stream": False}
        response = await self._post_native(ex, raw if outgoing is body else encode_json(outgoing), stream=False)
        if response.status_code >= 400:
            return await self._upstream_failed(ex, response, call)
        if not ex.proxy_tools and not self.pipeline.reads_answer(ex):  # nothing reads it: the upstream's bytes
            check_answer_bytes(response)
            call.finish(response.status_code, chat_usage(usage_of(response.content)), model_of(response.content))
            await self.pipeline.complete(ex, "ok")
            return Response(response.content, status_code=response.status_code, headers=relay_headers(response))
        data = completion_json(response)
        call.finish(response.status_code, chat_usage(data.get("usage")), data.get("model"))
        if ex.proxy_tools:
            data = await self._native_rounds(ex, outgoing, data)
        return await self._checked(ex, data)

    async def _post_native(self, ex: Exchange, payload: bytes, stream: bool) -> httpx.Response:
        assert self.anthropic is not None
        return (await self.anthropic.send("POST", "messages", payload, ex.notes.upstream_headers, stream=stream)).response

    def _passthrough(self, ex: Exchange, response: httpx.Response, call: UpstreamCall) -> Response:
        watch = MessageStreamWatch()

        async def relay() -> AsyncIterator[bytes]:
            try:
                async for out in checked_bytes(response, call, MessagesDialect(), watch.feed):
                    yield out
                call.finish(response.status_code, watch.usage(), watch.model(),
                            error=None if watch.ended else "upstream_stream_cut")
            finally:
                await response.aclose()
                call.finish(response.status_code, error="client_disconnected")  # no-op once finished
                await self.pipeline.complete(ex, "ok" if watch.ended else "cut")

        headers = relay_headers(response)
        headers["cache-control"] = "no-cache"
        return StreamingResponse(relay(), status_code=response.status_code, headers=headers, media_type="text/event-stream")

    async def _native_rounds(self, ex: Exchange, outgoing: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
        """Calls to the proxy's own tools answered here, in further rounds; calls left over, or mixed
        with the client's, are dropped from the answer and reported."""
        rounds = ProxyToolRounds(ex, self.max_rounds)
        body = dict(outgoing)
        usage: dict[str, int] = {}
        while True:
            add_usage(usage, data.get("usage"))
            uses = tool_uses_in_answer(data)
            calls = [{"id": u.get("id"), "type": "function",
                      "function": {"name": u.get("name"), "arguments": json.dumps(u.get("input", {}))}} for u in uses]
            proxy_calls, client_calls = rounds.split(calls)
            if not rounds.may_continue(proxy_calls, client_calls):
                break
            rounds.rounds += 1
            answers = await rounds.answer(proxy_calls)
            results = [{"type": "tool_result", "tool_use_id": a["tool_call_id"], "content": a["content"]} for a in answers]
            original, parsed = ex.notes.wire
            tools = render_tools(original, parsed, ex.forwarded_tools())  # find_tools appended what it found
            if tools is not UNCHANGED:
                body["tools"] = tools
            body = {**body, "messages": [*body["messages"], {"role": "assistant", "content": data.get("content") or []},
                                         {"role": "user", "content": results}], "stream": False}
            assert self.anthropic is not None
            call = UpstreamCall(self.telemetry, ex.model, "anthropic", self.anthropic.base_url, tally=ex.notes.usage)
            response = await self._post_native(ex, encode_json(body), stream=False)
            if response.status_code >= 400:
                call.finish(response.status_code)
                error, headers = await _anthropic_error(response)
                raise ProxyError(response.status_code, "upstream_error", error["error"].get("message") or "upstream error",
                                 headers=headers, relayed=error)
            data = completion_json(response)
            call.finish(response.status_code, chat_usage(data.get("usage")), data.get("model"))
        if rounds.rounds and usage:  # what every round cost, as the other APIs' rounds report it
            data["usage"] = {**(data.get("usage") or {}), **usage}
        if proxy_calls:
            rounds.report_dropped(proxy_calls)
            dropped = {c["id"] for c in proxy_calls}
            data["content"] = [b for b in data.get("content") or [] if not (b.get("type") == "tool_use" and b.get("id") in dropped)]
            if data.get("stop_reason") == "tool_use" and not client_calls:
                data["stop_reason"] = "end_turn"
        return data

    # ------------------------------------------------------------------ translated to chat completions

    async def _translated(self, ex: Exchange, call: UpstreamCall) -> Response:
        if ex.stream:
            ex.record("proxy", "stream_whole", reason="translated")
        outgoing = {**ex.outgoing_body(), "stream": False}
        outgoing.pop("stream_options", None)
        # Anthropic's own blocks (thinking with its signature, server tool blocks) mean nothing to a chat
        # upstream, and a strict one (OpenAI) refuses a message field it does not know.
        outgoing["messages"] = [{k: v for k, v in m.items() if k not in (THINKING_KEY, PROVIDER_KEY)}
                                for m in outgoing["messages"]]
        if uses_litellm(ex.model):  # a provider-prefixed model (gemini/…, bedrock/…): litellm calls it, as on chat
            from .upstream.providers import litellm_response

            try:
                response = await litellm_response(outgoing, False)
            except ProxyError as exc:
                call.finish(exc.status, error=exc.code)
                await self.pipeline.complete(ex, "rejected")
                return self._error(exc)
        else:
            response = (await self.upstream.send("POST", "chat/completions", encode_json(outgoing), ex.notes.upstream_headers)).response
        if response.status_code >= 400:
            detail = (await upstream_error(response))[0]["error"]
            call.finish(response.status_code)
            await self.pipeline.complete(ex, "rejected")
            return self._error(ProxyError(response.status_code, detail.get("code") or "upstream_error",
                                          detail.get("message") or "upstream error"))
        data = completion_json(response)
        call.finish(response.status_code, data.get("usage"), data.get("model"))
        if ex.proxy_tools:
            data = await self._proxy_tool_rounds(ex, stream=False).settle(data)
        return await self._checked(ex, _message_of(data, ex))

    # ------------------------------------------------------------------ the answer

    async def _checked(self, ex: Exchange, data: dict[str, Any]) -> Response:
        """The whole answer judged as a chat answer is; a blocked one becomes the notice."""
        outcome = "ok"
        text = answer_text(data)
        if text and self.pipeline.reads_answer(ex):
            verdict = await self.pipeline.run_response(ex, Answer(text=text, message=answer_as_chat(data), finish_reason="stop"))
            if isinstance(verdict, Reject):
                await self.pipeline.complete(ex, "blocked")
                return self._error(ProxyError(verdict.status, verdict.code, verdict.message, verdict.param, verdict.type))
            if isinstance(verdict, Block):
                outcome = "blocked"
                data = {**replace_answer(data, verdict.notice), "ctxwarden": BLOCKED_MARK}
        await self.pipeline.complete(ex, outcome)
        if ex.stream:
            return StreamingResponse(iter([encode(e) for e in message_events(data)]), media_type="text/event-stream",
                                     headers={"cache-control": "no-cache"})
        return JSONResponse(data)

    async def _upstream_failed(self, ex: Exchange, response: httpx.Response, call: UpstreamCall) -> Response:
        """Anthropic's own error, relayed with its status (wrapped when it is not Anthropic-shaped)."""
        call.finish(response.status_code)
        await self.pipeline.complete(ex, "rejected")
        data, headers = await _anthropic_error(response)
        return JSONResponse(data, status_code=response.status_code, headers=headers)

    # ------------------------------------------------------------------ count_tokens

    async def count_tokens(self, request: Request) -> Response:
        """POST /v1/messages/count_tokens: Anthropic's count when it is the upstream, else our own."""
        try:
            raw = await request.body()
            body = parse_json_body(raw)
            await check_relayed(charge_of(request.scope), "POST", "messages/count_tokens", raw, "application/json")
            if self.anthropic is not None:
                headers = self.anthropic.request_headers(request.headers)
                response = (await self.anthropic.send("POST", "messages/count_tokens", raw, headers)).response
                return Response(response.content, status_code=response.status_code, headers=relay_headers(response))
            parsed = parse_request(body)
            model = str(body.get("model") or "")
            tokens = self.pipeline.services.tokens
            count = tokens.count_messages(parsed.messages, model) + tokens.count_tools(parsed.tools or None, model)
            return JSONResponse({"input_tokens": count})
        except ProxyError as exc:
            return self._error(exc)
        except AnthropicWireError as exc:
            return self._error(ProxyError(400, "invalid_request", str(exc)))


    async def relay(self, request: Request) -> Response:
        """Anthropic's other /v1/messages/* routes (message batches): to Anthropic with Anthropic's key,
        never to the OpenAI upstream with the OpenAI key; without an Anthropic upstream, a clear 404."""
        try:
            path = relay_path(f"messages/{request.path_params['path']}", request.method)
            if self.anthropic is None:
                raise ProxyError(404, "not_found", f"/v1/{path} needs upstream.anthropic.base_url (translated mode "
                                                  "serves /v1/messages and /v1/messages/count_tokens only)")
            if request.url.query:
                path = f"{path}?{request.url.query}"
            body = await request.body() if request.method not in ("GET", "HEAD") else None
            await check_relayed(charge_of(request.scope), request.method, path, body, request.headers.get("content-type", ""))
            response = (await self.anthropic.send(request.method, path, body, self.anthropic.request_headers(request.headers))).response
            return Response(response.content, status_code=response.status_code, headers=relay_headers(response))
        except ProxyError as exc:
            return self._error(exc)


def _message_of(data: dict[str, Any], ex: Exchange) -> dict[str, Any]:
    """A chat completion as the Message it answers (text, then tool_use blocks)."""
    choice = (data.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    text = content_text(message) if message.get("content") else ""
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    for call in message.get("tool_calls") or []:
        fn = call.get("function") or {}
        try:
            arguments = json.loads(fn.get("arguments") or "{}")
        except ValueError:
            arguments = {"_raw": fn.get("arguments")}
        blocks.append({"type": "tool_use", "id": call.get("id"), "name": fn.get("name"), "input": arguments})
    usage = data.get("usage") or {}
    return {"id": f"msg_{data.get('id') or ex.request_id}", "type": "message", "role": "assistant",
            "model": data.get("model") or ex.model, "content": blocks,
            "stop_reason": STOP_REASONS.get(choice.get("finish_reason") or "stop", "end_turn"), "stop_sequence": None,
            "usage": {"input_tokens": usage.get("prompt_tokens", 0), "output_tokens": usage.get("completion_tokens", 0)}}


def _error_text(content: bytes) -> str:
    return content.decode("utf-8", errors="replace").strip()[:500]


async def _anthropic_error(response: httpx.Response) -> tuple[dict[str, Any], dict[str, str]]:
    """Anthropic's error body (wrapped when it is not Anthropic-shaped) and the headers relayed with it."""
    content = await response.aread()
    await response.aclose()
    try:
        data = json.loads(content)
    except ValueError:
        data = None
    if not (isinstance(data, dict) and data.get("type") == "error" and isinstance(data.get("error"), dict)):
        data = error_body(response.status_code, None, f"The upstream answered {response.status_code}: {_error_text(content)}")
    return data, {k: v for k, v in response.headers.items() if k.lower() in ("retry-after", "request-id")}
