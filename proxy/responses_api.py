"""POST /v1/responses: OpenAI's Responses API through the same policies as chat completions.

The request is parsed into the chat-shaped conversation the policies read (wire/responses.py),
the policies run exactly as for chat completions, and the edited conversation is written back in
the Responses shape; a request no policy changed is forwarded as the client's bytes. Answers:

- the proxy's own answer (a stopped loop, a question the user chose to be asked) is a Response
  object or its event stream, marked `"ctxwarden": {"author": "proxy", ...}`;
- a plain answer is checked as a chat answer is (a blocked one becomes the notice);
- a stream passes through unbuffered, event by event; when the answer checker has a knowledge base
  to judge it against, its text goes out sentence by sentence as each is judged (typed_streams.py,
  action `proxy.stream_gated`) and a contradicted sentence never reaches the client. When the
  proxy offered its own tools (find_tools, context_recall), whose calls it answers itself in
  further rounds, the upstream is asked for the whole answer and the client gets it as the same
  typed events (action `proxy.stream_whole`: the text arrives at once instead of token by token).

With `previous_response_id` the provider holds the earlier turns: the policies see and act on what
the request carries (the README says what that means for compaction and clash).
"""

from __future__ import annotations

from typing import Any, AsyncIterator

import httpx
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from ctxwarden.policies.base import Answer, Block, Exchange, Reject, Respond

from .answers import BLOCKED_MARK
from .chat import ChatHandler
from .upstream_answer import UpstreamJSON, encode_json, relay_error, relay_headers, round_error
from .errors import ProxyError
from .genai import UpstreamCall, chat_usage, model_of, usage_of
from .proxy_tools import ProxyToolRounds, add_usage
from .typed_streams import checked_bytes, gated_stream
from .upstream.client import check_answer_bytes, completion_json
from .wire.responses import (
    UNCHANGED,
    ParsedRequest,
    answer_text,
    calls_in_answer,
    parse_request,
    proxy_response,
    proxy_stream_events,
    render_request,
    render_tools,
    replace_answer,
    without_tools,
)
from .wire.responses_gate import ResponsesDialect
from .wire.responses_stream import StreamTail, encode_event, response_events

PATH = "responses"


class ResponsesHandler(ChatHandler):
    """The chat handler's path (policies, spans, metrics, headers), in the Responses API's shape."""

    api = "responses"
    needs = "`model` and `input`"
    # Fields the proxy reads or forwards as they are, checked as chat's are (a wrong type got relayed)
    TYPED = (("stream", bool, "a boolean"), ("store", bool, "a boolean"), ("previous_response_id", str, "a string"),
             ("user", str, "a string"), ("safety_identifier", str, "a string"))

    def _exchange(self, request_id: str, body: dict[str, Any], headers: Any, body_bytes: int, started: float) -> Exchange:
        if not isinstance(body, dict) or not isinstance(body.get("model"), str) or not body["model"]:
            raise ProxyError(400, "invalid_request", "The body must be a JSON object with a `model`.", param="model")
        for name, kind, what in self.TYPED:
            if body.get(name) is not None and not isinstance(body[name], kind):
                raise ProxyError(400, "invalid_request", f"`{name}` must be {what}.", param=name)
        parsed = parse_request(body)
        chat = {"model": body["model"], "messages": parsed.messages, "stream": bool(body.get("stream"))}
        if parsed.tools is not None:
            chat["tools"] = parsed.tools
        if parsed.tool_choice is not None:
            chat["tool_choice"] = parsed.tool_choice
        for ours, theirs in (("user", "user"), ("user", "safety_identifier"), ("max_tokens", "max_output_tokens")):
            if body.get(theirs) is not None and ours not in chat:
                chat[ours] = body[theirs]
        return self._new_exchange(request_id, chat, headers, body_bytes, started, wire=(body, parsed))

    async def _handle(self, ex: Exchange, raw: bytes, request: Request, span: Any) -> Response:
        ended = await self._policies(ex, request)
        if ended is not None:
            return ended
        self._record_tokens(ex, span)
        self._watch_prefix(ex, ex.outgoing_body(), span)
        body, parsed = ex.notes.wire
        outgoing = self._render(ex, body, parsed)
        whole = bool(ex.proxy_tools)
        call = UpstreamCall(self.telemetry, ex.model, "openai", self.upstream.base_url, tally=ex.notes.usage)
        response: httpx.Response | None = None
        try:
            if ex.stream and not whole:
                payload = raw if outgoing is body else encode_json(outgoing)
                response = await self._post(ex, payload, stream=True)
                if response.status_code >= 400:
                    return await self._upstream_failed(ex, response, call)
                if self.pipeline.reads_answer(ex, self.pipeline.stream_validators):
                    return gated_stream(self.pipeline, ex, response, call, ResponsesDialect())
                return self._passthrough(ex, response, call)
            if ex.stream:
                ex.record("proxy", "stream_whole", reason="proxy_tools")
                outgoing = {**outgoing, "stream": False}
            payload = raw if outgoing is body else encode_json(outgoing)
            response = await self._post(ex, payload, stream=False)
            if response.status_code >= 400:
                return await self._upstream_failed(ex, response, call)
            return await self._answer(ex, outgoing, response, call)
        except BaseException as exc:
            status = response.status_code if response is not None else getattr(exc, "status", None)
            call.finish(status, error=getattr(exc, "code", None) or type(exc).__name__)
            raise

    # ------------------------------------------------------------------ pieces

    @staticmethod
    def _render(ex: Exchange, body: dict[str, Any], parsed: ParsedRequest) -> dict[str, Any]:
        """The Responses body to forward: `body` itself when no policy changed the conversation."""
        if not ex.changed and not ex.proxy_tools:
            return body
        tools = ex.forwarded_tools()
        return render_request(body, parsed, ex.messages, tools if (tools or parsed.tools is not None) else None)

    async def _upstream_failed(self, ex: Exchange, response: httpx.Response, call: UpstreamCall) -> Response:
        """The upstream's error, relayed with its status (OpenAI's shape, as on chat)."""
        call.finish(response.status_code)
        await self.pipeline.complete(ex, "rejected")
        return await relay_error(response)

    async def _post(self, ex: Exchange, payload: bytes, stream: bool) -> httpx.Response:
        result = await self.upstream.send("POST", PATH, payload, ex.notes.upstream_headers, stream=stream)
        return result.response

    def _proxy_answer(self, ex: Exchange, verdict: Respond) -> Response:
        if ex.stream:
            events = proxy_stream_events(ex.model, ex.request_id, verdict.content, verdict.reason)
            return StreamingResponse(iter([encode_event(e) for e in events]), media_type="text/event-stream")
        return JSONResponse(proxy_response(ex.model, ex.request_id, verdict.content, verdict.reason))

    def _passthrough(self, ex: Exchange, response: httpx.Response, call: UpstreamCall) -> Response:
        tail = StreamTail()

        async def relay() -> AsyncIterator[bytes]:
            outcome = "cut"
            try:
                async for out in checked_bytes(response, call, ResponsesDialect(), tail.feed):
                    yield out
                done = tail.completed()
                outcome = "ok" if done is not None else "cut"
                call.finish(response.status_code, chat_usage((done or {}).get("usage")), (done or {}).get("model"),
                            error=None if done is not None else "upstream_stream_cut")
            finally:
                await response.aclose()
                call.finish(response.status_code, error="client_disconnected")  # no-op once finished
                await self.pipeline.complete(ex, outcome)

        headers = relay_headers(response)
        headers["cache-control"] = "no-cache"
        return StreamingResponse(relay(), status_code=response.status_code, headers=headers, media_type="text/event-stream")

    async def _answer(self, ex: Exchange, outgoing: dict[str, Any], response: httpx.Response, call: UpstreamCall) -> Response:
        if not ex.proxy_tools and not self.pipeline.reads_answer(ex):  # nothing reads it: the upstream's bytes
            check_answer_bytes(response)
            call.finish(response.status_code, chat_usage(usage_of(response.content)), model_of(response.content))
            await self.pipeline.complete(ex, "ok")
            return Response(response.content, status_code=response.status_code, headers=relay_headers(response))
        data = completion_json(response)
        call.finish(response.status_code, chat_usage(data.get("usage")), data.get("model"))
        if ex.proxy_tools:
            data = without_tools(await self._proxy_rounds(ex, outgoing, data), set(ex.proxy_tools))
        outcome = "ok"
        text = answer_text(data)
        if text and self.pipeline.reads_answer(ex):
            message = {"role": "assistant", "content": text}
            verdict = await self.pipeline.run_response(ex, Answer(text=text, message=message, finish_reason="stop"))
            if isinstance(verdict, Reject):
                await self.pipeline.complete(ex, "blocked")
                return ProxyError(verdict.status, verdict.code, verdict.message, verdict.param, verdict.type).response()
            if isinstance(verdict, Block):
                outcome = "blocked"
                data = {**replace_answer(data, verdict.notice), "ctxwarden": BLOCKED_MARK}
        await self.pipeline.complete(ex, outcome)
        if ex.stream:
            events = [encode_event(e) for e in response_events(data)]
            return StreamingResponse(iter(events), media_type="text/event-stream", headers={"cache-control": "no-cache"})
        return UpstreamJSON(data, status_code=response.status_code, headers=relay_headers(response))

    async def _proxy_rounds(self, ex: Exchange, outgoing: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
        """Calls to the proxy's own tools answered here, in further rounds (at most the rounds the
        policies allow); calls left over, or mixed with the client's, are dropped and reported."""
        rounds = ProxyToolRounds(ex, self.max_rounds)
        body = dict(outgoing)
        usage: dict[str, int] = {}
        while True:
            add_usage(usage, data.get("usage"))
            calls = {c.get("call_id"): c for c in calls_in_answer(data)}
            chat_calls = [{"id": cid, "type": "function", "function": {"name": c.get("name"), "arguments": c.get("arguments")}}
                          for cid, c in calls.items()]
            proxy_calls, client_calls = rounds.split(chat_calls)
            if not rounds.may_continue(proxy_calls, client_calls):
                break
            rounds.rounds += 1
            answers = await rounds.answer(proxy_calls)
            items = body.get("input")
            items = [{"role": "user", "content": items}] if isinstance(items, str) else list(items or [])
            items += [i for i in data.get("output") or [] if isinstance(i, dict) and i.get("type") in ("reasoning", "function_call")]
            items += [{"type": "function_call_output", "call_id": a["tool_call_id"], "output": a["content"]} for a in answers]
            body = {**body, "input": items, "stream": False}
            tools = render_tools(ex.notes.wire[1], ex.forwarded_tools())  # find_tools appended what it found
            if tools is not UNCHANGED and tools:
                body["tools"] = tools
            call = UpstreamCall(self.telemetry, ex.model, "openai", self.upstream.base_url, tally=ex.notes.usage)
            response = await self._post(ex, encode_json(body), stream=False)
            if response.status_code >= 400:
                call.finish(response.status_code)
                raise await round_error(response)
            data = completion_json(response)
            call.finish(response.status_code, chat_usage(data.get("usage")), data.get("model"))
        if proxy_calls:
            rounds.report_dropped(proxy_calls)
            dropped = {c["id"] for c in proxy_calls}
            data["output"] = [i for i in data.get("output") or [] if not (isinstance(i, dict) and i.get("call_id") in dropped)]
        if rounds.rounds and usage:
            data["usage"] = {**(data.get("usage") or {}), **usage}
        return data


