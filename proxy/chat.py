"""POST /v1/chat/completions: parse, run the policies, forward, validate, answer."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any

import httpx
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from ctxwarden.policies.base import HEAVY_BODY_BYTES, Answer, Block, Exchange, Reject, Respond, Verdict
from ctxwarden.policies.messages import content_text

from .answers import BLOCKED_MARK, COUNTED_PROMPT, completion_chunks, completion_object, disconnected
from .errors import ProxyError
from .genai import UpstreamCall, fail_span, model_of, provider_name, server_span, usage_of
from .models import ModelInfo, uses_litellm
from .pipeline import Pipeline
from .prefix_watch import PrefixWatch
from .chat_rounds import chat_rounds
from .upstream_answer import UpstreamJSON, encode_json, relay_error, relay_headers
from .keys.middleware import charge_of
from .streaming.relay import StreamRelay
from .telemetry import Telemetry
from .session_ids import session_of  # noqa: F401 (tests and handlers import it from here)
from .tenants import TenantError, check_tenant
from .upstream.client import Upstream, check_answer_bytes, completion_json
from .validation import body_too_large, check_chat_body, parse_json_body

log = logging.getLogger("ctxwarden.chat")



async def read_body(request: Request, limit_mb: float) -> bytes:
    limit = int(limit_mb * 1024 * 1024)
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise body_too_large(limit_mb)
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise body_too_large(limit_mb)
            chunks.append(chunk)
    except ClientDisconnect:  # gone (or cut off by server.body_timeout_s, which already answered 408)
        raise ProxyError(400, "client_disconnected", "The client closed the connection before the request body was complete.")
    return b"".join(chunks)


def tenant_of(hints: dict[str, str]) -> str | None:
    """The tenant named by x-ctxwarden-tenant (absent or empty: the shared namespace); 400 if invalid."""
    name = hints.get("x-ctxwarden-tenant")
    if not name:
        return None
    try:
        return check_tenant(name)
    except TenantError as exc:
        raise ProxyError(400, "invalid_tenant", str(exc), param=exc.param) from exc


class ChatHandler:
    api = "chat"  # the API this handler speaks: in spans, metrics and the dashboard
    needs = "`model` and `messages`"  # what an empty body is told to send

    def __init__(
        self,
        pipeline: Pipeline,
        upstream: Upstream,
        telemetry: Telemetry,
        models: ModelInfo,
        max_body_mb: float,
        max_proxy_tool_rounds: int = 3,
    ) -> None:
        self.pipeline = pipeline
        self.upstream = upstream
        self.telemetry = telemetry
        self.metrics = telemetry.metrics
        self.models = models
        self.max_body_mb = max_body_mb
        self.max_rounds = max_proxy_tool_rounds
        self.prefix_watch = PrefixWatch()

    # ------------------------------------------------------------------ entry

    async def handle(self, request: Request) -> Response:
        request_id = uuid.uuid4().hex[:24]
        started = time.perf_counter()
        ex: Exchange | None = None
        with server_span(self.telemetry, request.method, request.url.path, request.headers) as span:
            span.set_attribute("ctxwarden.request_id", request_id)
            span.set_attribute("ctxwarden.api", self.api)
            try:
                raw = await read_body(request, self.max_body_mb)
                body = parse_json_body(raw, self.needs)
                ex = self._exchange(request_id, body, request.headers, len(raw), started)
                charge = charge_of(request.scope)
                if charge is not None:  # keys mode: the key may call this model; it is charged what it uses
                    await charge.check_request(ex.model, body)
                    ex.notes.usage = charge.usage
                span.set_attribute("gen_ai.request.model", ex.model)
                span.set_attribute("ctxwarden.session", ex.session_id)
                response = await self._handle(ex, raw, request, span)
            except ProxyError as exc:
                response = self._error(exc)
                fail_span(span, exc.status, exc.code)
                if ex is not None:
                    await self.pipeline.complete(ex, "rejected")
                else:
                    self.pipeline.unreadable(request_id, started)
            else:
                fail_span(span, response.status_code, str(response.status_code))  # a relayed upstream 5xx
            span.set_attribute("http.response.status_code", response.status_code)
            if ex is not None:
                span.set_attribute("ctxwarden.actions", ",".join(ex.action_labels()))
            self._finish_headers(response, request_id, ex)
            self.metrics.add(
                "ctxwarden.requests", 1, api=self.api,
                model=ex.model if ex else None, status=response.status_code, stream=bool(ex and ex.stream),
            )
            self.metrics.record("ctxwarden.request.duration_ms", (time.perf_counter() - started) * 1000,
                                model=ex.model if ex else None)
            return response

    def _exchange(self, request_id: str, body: dict[str, Any], headers: Any, body_bytes: int, started: float) -> Exchange:
        """The request as the policies read it (an API's handler parses its own shape here); 400 if invalid."""
        check_chat_body(body)
        return self._new_exchange(request_id, body, headers, body_bytes, started)

    def _new_exchange(self, request_id: str, chat: dict[str, Any], headers: Any, body_bytes: int, started: float,
                      wire: Any = None, upstream: Upstream | None = None) -> Exchange:
        """The Exchange for a chat-shaped body (`chat`: the client's own, or what an API's handler
        parsed its request into, kept as `wire`), with the headers `upstream` is sent."""
        hints = {k.lower(): v for k, v in headers.items() if k.lower().startswith("x-ctxwarden-")}
        ex = Exchange(
            request_id=request_id,
            model=chat["model"],
            messages=chat["messages"],
            tools=chat.get("tools"),
            body=chat,
            stream=bool(chat.get("stream")),
            tenant=tenant_of(hints),
            session_id=session_of(chat, headers),
            headers=hints,
            context_window=self.models.context_window(chat["model"]),
            body_bytes=body_bytes,
        )
        ex.notes.wire = wire
        ex.notes.api = self.api
        ex.notes.upstream_headers = (upstream or self.upstream).request_headers(headers)
        ex.notes.started = started
        return ex

    def _finish_headers(self, response: Response, request_id: str, ex: Exchange | None) -> None:
        response.headers["x-ctxwarden-request-id"] = request_id
        response.headers["x-ctxwarden-actions"] = ",".join(ex.action_labels()) if ex else ""
        if ex:
            for key, value in ex.response_headers.items():
                response.headers[key] = value

    # ------------------------------------------------------------------ the exchange

    async def _run_policies(self, ex: Exchange, request: Request) -> Verdict | None:
        """The request policies; for a large body, while watching the client: one that leaves stops
        their work (what runs in worker threads checks ex.notes.cancelled) and the upstream is never
        called. A small body's policies take about a millisecond: no watcher is worth its cost."""
        if ex.body_bytes < HEAVY_BODY_BYTES:
            return await self.pipeline.run_request(ex)
        work = asyncio.ensure_future(self.pipeline.run_request(ex))
        gone = asyncio.ensure_future(disconnected(request))
        try:
            await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
        if not work.done():
            ex.notes.cancelled.set()
            ex.record("proxy", "client_disconnected")
            await work  # ends soon: the policies' work sees the flag
            raise ProxyError(499, "client_disconnected", "The client closed the connection; the request was not forwarded.")
        return work.result()

    async def _policies(self, ex: Exchange, request: Request) -> Response | None:
        """The request policies; the answer when one of them ended the exchange (a Reject in this
        API's error shape, a Respond as this API's answer), else None: forward the request."""
        started = time.perf_counter()
        verdict = await self._run_policies(ex, request)
        # What the request policies took, in the standard header browsers and load tools read.
        ex.response_headers["server-timing"] = f"ctxwarden-policies;dur={(time.perf_counter() - started) * 1000:.2f}"
        if isinstance(verdict, Reject):
            await self.pipeline.complete(ex, "rejected")
            return self._error(ProxyError(verdict.status, verdict.code, verdict.message, verdict.param, verdict.type))
        if isinstance(verdict, Respond):
            await self.pipeline.complete(ex, "responded")
            return self._proxy_answer(ex, verdict)
        return None

    def _proxy_answer(self, ex: Exchange, verdict: Respond) -> Response:
        """An answer the proxy wrote (verdict Respond), in this API's shape."""
        made = completion_chunks if ex.stream else completion_object
        answer = made(ex, verdict.content, verdict.finish_reason, verdict.reason)
        return StreamingResponse(iter(answer), media_type="text/event-stream") if ex.stream else JSONResponse(answer)

    async def _handle(self, ex: Exchange, raw: bytes, request: Request, span: Any) -> Response:
        ended = await self._policies(ex, request)
        if ended is not None:
            return ended
        self._record_tokens(ex, span)
        outgoing = ex.outgoing_body()
        self._watch_prefix(ex, outgoing, span)
        litellm = uses_litellm(ex.model)
        call = UpstreamCall(self.telemetry, ex.model, provider_name(ex.model, litellm), self.upstream.base_url, tally=ex.notes.usage)
        response: httpx.Response | None = None
        try:
            response = await self._send(ex, raw, outgoing, litellm, call)
            if response.status_code >= 400:
                call.finish(response.status_code)
                await self.pipeline.complete(ex, "rejected")
                return await relay_error(response)
            if ex.stream:
                return self._stream(ex, response, call)
            return await self._complete(ex, response, call)
        except BaseException as exc:  # the span ends however the exchange does (finish is idempotent)
            status = response.status_code if response is not None else getattr(exc, "status", None)
            call.finish(status, error=getattr(exc, "code", None) or type(exc).__name__)
            raise

    def _error(self, exc: ProxyError) -> Response:
        """An error in this API's own shape (OpenAI's here)."""
        return exc.response()

    def _record_tokens(self, ex: Exchange, span: Any) -> None:
        """The tokens received and forwarded, as the budget counted them (metrics, span)."""
        budget = ex.notes.budget
        if budget is not None:
            after = budget.tokens_before if budget.tokens_after is None else budget.tokens_after
            ex.notes.usage.setdefault(COUNTED_PROMPT, after)  # a client key is charged this if the upstream reports no usage
            self.metrics.record("ctxwarden.request.received_tokens", budget.tokens_before, model=ex.model)
            self.metrics.record("ctxwarden.request.forwarded_tokens", after, model=ex.model)
            span.set_attribute("ctxwarden.tokens.before", budget.tokens_before)
            span.set_attribute("ctxwarden.tokens.after", after)

    async def _send(self, ex: Exchange, raw: bytes, outgoing: dict[str, Any], litellm: bool, call: UpstreamCall) -> httpx.Response:
        if litellm:
            from .upstream.providers import litellm_response

            return await litellm_response(outgoing, ex.stream)
        # Streams report no usage unless asked: the proxy asks (and strips it from what the client gets),
        # also when the client said include_usage false, which otherwise left a client key uncharged.
        options = ex.body.get("stream_options")
        ask_usage = ex.stream and not (isinstance(options, dict) and options.get("include_usage") is True)
        if ex.changed or ex.proxy_tools or (ask_usage and options is not None):
            payload = encode_json({**outgoing, "stream_options": {**(options or {}), "include_usage": True}} if ask_usage else outgoing)
        else:  # the client's bytes, with the option spliced in front (no re-encoding of a long history)
            payload = b'{"stream_options":{"include_usage":true},' + raw.removeprefix(b"\xef\xbb\xbf").lstrip()[1:] if ask_usage else raw
        ex.notes.usage_added = ask_usage
        result = await self.upstream.send("POST", "chat/completions", payload, ex.notes.upstream_headers, stream=ex.stream)
        if call.span.is_recording():
            call.span.set_attribute("ctxwarden.attempts", result.attempts)
        return result.response

    def _watch_prefix(self, ex: Exchange, outgoing: dict[str, Any], span: Any) -> None:
        """Report whether this request keeps the session's cached prefix (x-ctxwarden-prefix, span, metric)."""
        state = self.prefix_watch.observe(ex, outgoing)
        ex.response_headers["x-ctxwarden-prefix"] = state
        span.set_attribute("ctxwarden.prefix_stable", state != "changed")
        if state != "new":
            self.metrics.add("ctxwarden.prefix_stable", 1, stable=str(state == "extends").lower(), model=ex.model)

    async def _complete(self, ex: Exchange, response: httpx.Response, call: UpstreamCall) -> Response:
        if not ex.proxy_tools and not self.pipeline.reads_answer(ex):
            check_answer_bytes(response)
            await self.pipeline.complete(ex, "ok")
            call.finish(response.status_code, usage_of(response.content), model_of(response.content))
            return Response(response.content, status_code=response.status_code, headers=relay_headers(response))
        try:
            data = completion_json(response)
        except ProxyError as exc:
            call.finish(response.status_code, error=exc.code)
            raise
        call.finish(response.status_code, data.get("usage"), data.get("model"))
        if ex.proxy_tools:
            data = await chat_rounds(self, ex, stream=False).settle(data)
        blocked: list[int] = []  # the choices whose answer the notice replaced
        for choice in data.get("choices") or []:
            msg = choice.get("message")
            text = content_text(msg) if isinstance(msg, dict) else ""
            if not text:
                continue
            verdict = await self.pipeline.run_response(ex, Answer(text=text, message=msg, finish_reason=choice.get("finish_reason")))
            if isinstance(verdict, Reject):
                await self.pipeline.complete(ex, "blocked")
                return ProxyError(verdict.status, verdict.code, verdict.message, verdict.param, verdict.type).response()
            if isinstance(verdict, Block):
                choice["message"] = {"role": "assistant", "content": verdict.notice, "refusal": None}
                choice["finish_reason"] = "content_filter"
                blocked.append(choice.get("index", 0))
        if blocked:
            data["ctxwarden"] = {**BLOCKED_MARK, "choices": blocked}
        await self.pipeline.complete(ex, "blocked" if blocked else "ok")
        return UpstreamJSON(data, status_code=response.status_code, headers=relay_headers(response))

    def _stream(self, ex: Exchange, response: httpx.Response, call: UpstreamCall) -> Response:
        rounds = chat_rounds(self, ex, stream=True, first=(call, response.status_code)) if ex.proxy_tools else None

        async def finished(outcome: str) -> None:  # the last round's call (each earlier one ended with its round)
            last, status = rounds.in_flight if rounds else (call, response.status_code)
            last.finish(status, relay.round_usage or usage_of(relay.tail), model_of(relay.tail),
                        error="upstream_stream_cut" if outcome == "cut" else None)
            await self.pipeline.complete(ex, outcome)

        validate = self.pipeline.run_response if self.pipeline.reads_answer(ex, self.pipeline.stream_validators) else None
        relay = StreamRelay(
            ex,
            validate=validate,
            releasable=self.pipeline.stream_releasable if validate else None,
            tools=rounds,
            on_finish=finished,
        )
        body = relay.relay(response) if (validate or ex.proxy_tools) else relay.passthrough(response)
        headers = relay_headers(response)
        headers["cache-control"] = "no-cache"
        return StreamingResponse(body, status_code=response.status_code, headers=headers, media_type="text/event-stream")
