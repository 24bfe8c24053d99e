"""Upstream faults relayed faithfully (issue 13, A): the real proxy in front of small hostile
upstreams (bad JSON, malformed SSE, bad gzip, 500s) and of a local Anthropic-shaped server."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any, Awaitable, Callable

import httpx
import openai
import pytest
import respx
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from ctxwarden.proxy.config import UpstreamConfig
from ctxwarden.proxy.errors import ProxyError
from ctxwarden.proxy.local_server import LocalServer
from ctxwarden.proxy.upstream.client import Upstream
from tests.conftest import openai_client, policies_off

HI = [{"role": "user", "content": "hi"}]
Handler = Callable[[Request], Awaitable[Response]]


def behind(start_proxy, upstream: LocalServer, policies: dict[str, Any] | None = None, **upstream_cfg: Any):
    return start_proxy({"policies": policies_off() if policies is None else policies,
                        "upstream": {"base_url": f"{upstream.url}/v1", **upstream_cfg}})


def gated(proxy):
    """The poisoning policy reads a stream only when its knowledge base holds something to judge by."""
    from ctxwarden.policies.poisoning.kb import Document

    proxy.app.state.pipeline.policy("poisoning").kb(None).add([Document("d", "The Eiffel Tower is in Paris.", {})])
    return proxy


def chunk(text: str | None = None, finish: str | None = None, index: int = 0) -> bytes:
    delta = {"content": text} if text is not None else {}
    obj = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o",
           "choices": [{"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}]}
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def sse_events(body: bytes) -> list[Any]:
    """The data payloads of an SSE body, JSON-decoded where they are JSON."""
    out = []
    for event in body.decode().split("\n\n"):
        if event.startswith("data: "):
            data = event[6:]
            try:
                out.append(json.loads(data))
            except ValueError:
                out.append(data)
    return out


# ---------------------------------------------------------------------- 8. invalid JSON in a 200


@pytest.mark.parametrize("body, fragment", [
    (b'{"choices": [{"message": ', "not valid JSON"),
    (b'[1, 2, 3]', "not a JSON object"),
    (b'{"choices": "nope"}', "'choices' is not a list"),
])
def test_a_200_that_is_not_a_completion_is_a_502_naming_the_fault(start_proxy, hostile, body, fragment):
    async def handler(request: Request) -> Response:
        return Response(body, media_type="application/json")

    proxy = behind(start_proxy, hostile(handler), policies=policies_off("poisoning"))  # poisoning parses the answer
    r = httpx.post(f"{proxy.url}/v1/chat/completions", json={"model": "gpt-4o", "messages": HI})
    assert r.status_code == 502, r.text
    error = r.json()["error"]
    assert error["code"] == "upstream_invalid_response" and error["type"] == "server_error"
    assert fragment in error["message"] and "200" in error["message"]


def test_an_answer_with_a_lone_surrogate_escape_is_relayed_not_a_500(start_proxy, hostile):
    """Valid JSON that is not valid Unicode: relayed as the same escape (the client decides)."""
    async def handler(request: Request) -> Response:
        body = b'{"id": "x", "object": "chat.completion", "choices": [{"index": 0, "finish_reason": "stop", ' \
               b'"message": {"role": "assistant", "content": "odd \\ud800 text"}}]}'
        return Response(body, media_type="application/json")

    proxy = behind(start_proxy, hostile(handler), policies=policies_off("poisoning"))
    r = httpx.post(f"{proxy.url}/v1/chat/completions", json={"model": "gpt-4o", "messages": HI})
    assert r.status_code == 200, r.text
    assert b"\\ud800" in r.content
    assert r.json()["choices"][0]["message"]["content"].startswith("odd ")


async def test_a_proxy_tool_round_that_answers_garbage_is_a_502():
    from ctxwarden.policies.base import Exchange, ProxyTool
    from ctxwarden.proxy.proxy_tools import ProxyToolRounds

    async def ask_again(body: dict[str, Any]) -> httpx.Response:
        return httpx.Response(200, content=b"<html>oops</html>")

    ex = Exchange("r1", "gpt-4o", list(HI), None, {"model": "gpt-4o", "messages": HI})
    ex.proxy_tools["recall"] = ProxyTool({"type": "function", "function": {"name": "recall"}}, _echo, owner="x")
    rounds = ProxyToolRounds(ex, 3, ask_again)
    first = {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "recall", "arguments": "{}"}}]}}]}
    with pytest.raises(ProxyError) as info:
        await rounds.settle(first)
    assert info.value.status == 502 and info.value.code == "upstream_invalid_response"
    assert "not valid JSON" in info.value.message


async def _echo(ex: Any, arguments: str) -> str:
    return "recalled"


# ---------------------------------------------------------------------- 9. malformed SSE mid-stream


def _stream_with_a_bad_line(request_count: list[int]) -> Handler:
    async def handler(request: Request) -> Response:
        request_count.append(1)

        async def events():
            yield chunk("Hello there. ")
            yield chunk("Nice day. ")
            yield b"data: {this is not json\n\n"
            yield chunk("After the fault. ")
            yield chunk(None, "stop")
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    return handler


def test_a_malformed_sse_line_in_a_gated_stream_ends_it_with_an_error_event(start_proxy, hostile, caplog):
    proxy = gated(behind(start_proxy, hostile(_stream_with_a_bad_line([])), policies=policies_off("poisoning")))
    with caplog.at_level(logging.WARNING, logger="ctxwarden.streaming"):
        with httpx.stream("POST", f"{proxy.url}/v1/chat/completions",
                          json={"model": "gpt-4o", "messages": HI, "stream": True}) as r:
            body = r.read()
    events = sse_events(body)
    assert b"data: {this is not json" not in body  # never relayed (the error message quotes it)
    text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if isinstance(e, dict) and e.get("choices"))
    assert text == "Hello there. Nice day. "
    assert "After the fault" not in body.decode()
    assert isinstance(events[-1], dict) and events[-1]["error"]["code"] == "upstream_invalid_stream"
    assert "not valid JSON" in events[-1]["error"]["message"]
    assert any("not valid JSON" in rec.getMessage() for rec in caplog.records)


def test_with_an_empty_knowledge_base_poisoning_leaves_a_stream_unread(start_proxy, hostile, monkeypatch):
    """Nothing to judge by: the stream passes through (exactly as with poisoning off) instead of being
    parsed event by event; either way the bad line ends it with an error event (issue 43)."""
    from ctxwarden.proxy.streaming.relay import StreamRelay

    modes: list[str] = []  # which relay mode each stream took

    def spy(mode: str):
        original = getattr(StreamRelay, mode)

        def wrapped(self, response):
            modes.append(mode)
            return original(self, response)
        return wrapped

    for mode in ("passthrough", "relay"):
        monkeypatch.setattr(StreamRelay, mode, spy(mode))
    proxy = behind(start_proxy, hostile(_stream_with_a_bad_line([])), policies=policies_off("poisoning"))
    httpx.post(f"{proxy.url}/v1/chat/completions", json={"model": "gpt-4o", "messages": HI})  # loads the (empty) KB
    for expected in ("passthrough", "relay"):
        with httpx.stream("POST", f"{proxy.url}/v1/chat/completions", json={"model": "gpt-4o", "messages": HI, "stream": True}) as r:
            body = r.read()
        assert modes.pop() == expected and not modes
        assert b"data: {this is not json" not in body and b"After the fault" not in body and b"[DONE]" not in body
        assert sse_events(body)[-1]["error"]["code"] == "upstream_invalid_stream"
        if expected == "passthrough":
            gated(proxy)


def test_the_sdk_sees_a_malformed_gated_stream_as_an_api_error(start_proxy, hostile):
    proxy = gated(behind(start_proxy, hostile(_stream_with_a_bad_line([])), policies=policies_off("poisoning")))
    received = []
    with pytest.raises(openai.APIError) as info:
        for c in openai_client(proxy, timeout=10).chat.completions.create(model="gpt-4o", messages=HI, stream=True):
            received.append(c.choices[0].delta.content or "")
    assert "".join(received) == "Hello there. Nice day. "
    assert "not valid JSON" in str(info.value)


async def test_a_malformed_sse_line_in_a_proxy_tool_stream_ends_it_with_an_error_event():
    from ctxwarden.policies.base import Exchange, ProxyTool
    from ctxwarden.proxy.proxy_tools import ProxyToolRounds
    from ctxwarden.proxy.streaming.relay import StreamRelay

    async def never(body: dict[str, Any]) -> httpx.Response:
        raise AssertionError("no second round: the first one is broken")

    async def events():
        yield chunk("Looking. ")
        yield b'data: {"choices": "not a list"}\n\n'
        yield chunk("never seen")
        yield b"data: [DONE]\n\n"

    ex = Exchange("r1", "gpt-4o", list(HI), None, {"model": "gpt-4o", "messages": HI, "stream": True}, stream=True)
    ex.proxy_tools["recall"] = ProxyTool({"type": "function", "function": {"name": "recall"}}, _echo, owner="x")
    outcomes: list[str] = []

    async def finished(outcome: str) -> None:
        outcomes.append(outcome)

    relay = StreamRelay(ex, validate=None, tools=ProxyToolRounds(ex, 3, never), on_finish=finished)
    body = b"".join([out async for out in relay.relay(httpx.Response(200, content=events()))])
    events_out = sse_events(body)
    assert events_out[0]["choices"][0]["delta"]["content"] == "Looking. "
    assert events_out[-1]["error"]["code"] == "upstream_invalid_stream" and "'choices' is not a list" in body.decode()
    assert b"never seen" not in body and outcomes == ["cut"]


def test_a_passthrough_stream_the_upstream_ends_early_still_ends_with_an_error_event(start_proxy, hostile):
    async def handler(request: Request) -> Response:
        async def events():
            yield chunk("Hello")
            yield chunk(" there")  # and no [DONE]
            yield b'data: {"id": "c1", "choi'  # an event cut off in the middle: not relayed

        return StreamingResponse(events(), media_type="text/event-stream")

    proxy = behind(start_proxy, hostile(handler))
    with httpx.stream("POST", f"{proxy.url}/v1/chat/completions",
                      json={"model": "gpt-4o", "messages": HI, "stream": True}) as r:
        body = r.read()
    assert body.startswith(chunk("Hello") + chunk(" there")) and b'"c1", "choi' not in body
    assert sse_events(body)[-1]["error"]["code"] == "upstream_stream_cut"


# ---------------------------------------------------------------------- 10. breaker, bad gzip, readiness


def _scripted(replies: list[Callable[[], Response]]) -> Handler:
    async def handler(request: Request) -> Response:
        return replies.pop(0)() if replies else JSONResponse(
            {"id": "x", "object": "chat.completion", "created": 1, "model": "gpt-4o",
             "choices": [{"index": 0, "message": {"role": "assistant", "content": "fine"}, "finish_reason": "stop"}]})

    return handler


def _bad_gzip() -> Response:
    return Response(b"this is not gzip at all", media_type="application/json", headers={"content-encoding": "gzip"})


def test_bad_gzip_is_a_502(start_proxy, hostile):
    proxy = behind(start_proxy, hostile(_scripted([_bad_gzip])))
    r = httpx.post(f"{proxy.url}/v1/chat/completions", json={"model": "gpt-4o", "messages": HI})
    assert r.status_code == 502, r.text
    assert r.json()["error"]["code"] == "upstream_invalid_response"
    assert "gzip" in r.json()["error"]["message"]  # it names the encoding that did not decode


def test_a_half_open_trial_that_fails_oddly_does_not_leave_the_breaker_stuck_open(start_proxy, hostile):
    replies = [lambda: JSONResponse({"error": {"message": "boom"}}, status_code=500), _bad_gzip]
    proxy = behind(start_proxy, hostile(_scripted(replies)),
                   circuit_breaker={"failure_threshold": 1, "cooldown_s": 0.3})
    url = f"{proxy.url}/v1/chat/completions"
    request = {"model": "gpt-4o", "messages": HI}
    assert httpx.post(url, json=request).status_code == 500  # opens the breaker
    assert httpx.post(url, json=request).status_code == 503  # fails fast
    time.sleep(0.35)
    assert httpx.post(url, json=request).status_code == 502  # the trial: a body that cannot be decoded
    assert httpx.get(f"{proxy.url}/readyz").json()["upstream_circuit"] == "open"
    time.sleep(0.35)
    r = httpx.post(url, json=request)  # a new trial is let through, and succeeds
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "fine"
    assert httpx.get(f"{proxy.url}/readyz").json()["upstream_circuit"] == "closed"


@pytest.mark.parametrize("exc", [httpx.DecodingError("bad gzip"), RuntimeError("a bug"), asyncio.CancelledError()])
async def test_any_exception_ends_the_half_open_trial(exc):
    clock = [0.0]
    up = Upstream(UpstreamConfig(base_url="http://up.test/v1", http_client="httpx", api_key_env=None, retries=0,
                                 circuit_breaker={"failure_threshold": 1, "cooldown_s": 10}))
    up.breaker.clock = lambda: clock[0]
    with respx.mock:
        route = respx.post("http://up.test/v1/chat/completions")
        route.mock(return_value=httpx.Response(500, json={}))
        await up.send("POST", "chat/completions", b"{}", {})
        assert up.breaker.state == "open"
        clock[0] = 11.0
        route.mock(side_effect=_raiser(exc))
        with pytest.raises((ProxyError, RuntimeError, asyncio.CancelledError)):
            await up.send("POST", "chat/completions", b"{}", {})
        clock[0] = 30.0  # past any new cooldown: the next call is a trial again, not refused for ever
        route.mock(return_value=httpx.Response(200, json={"ok": True}))
        assert (await up.send("POST", "chat/completions", b"{}", {})).response.json() == {"ok": True}
    assert up.breaker.state == "closed"
    await up.aclose()


def _raiser(exc: BaseException) -> Callable[[httpx.Request], httpx.Response]:
    def side_effect(request: httpx.Request) -> httpx.Response:
        raise exc

    return side_effect


@pytest.mark.parametrize("exc", [httpx.DecodingError("bad gzip"), httpx.RemoteProtocolError("garbled"),
                                 httpx.UnsupportedProtocol("ftp?"), httpx.LocalProtocolError("bad header")])
async def test_every_httpx_error_while_sending_is_a_502(exc):
    up = Upstream(UpstreamConfig(base_url="http://up.test/v1", http_client="httpx", api_key_env=None, retries=0))
    with respx.mock:
        respx.post("http://up.test/v1/chat/completions").mock(side_effect=exc)
        with pytest.raises(ProxyError) as info:
            await up.send("POST", "chat/completions", b"{}", {})
    assert info.value.status == 502 and type(exc).__name__ in info.value.message
    await up.aclose()


def test_readyz_is_503_while_the_breaker_is_open_and_healthz_stays_200(start_proxy, hostile):
    replies = [lambda: JSONResponse({"error": {"message": "boom"}}, status_code=500)]
    proxy = behind(start_proxy, hostile(_scripted(replies)),
                   circuit_breaker={"failure_threshold": 1, "cooldown_s": 30})
    ready = httpx.get(f"{proxy.url}/readyz")
    assert ready.status_code == 200 and ready.json()["status"] == "ready"
    assert ready.json()["store"] == "unused"  # no enabled policy uses the store: not checked, not counted
    httpx.post(f"{proxy.url}/v1/chat/completions", json={"model": "gpt-4o", "messages": HI})
    ready = httpx.get(f"{proxy.url}/readyz")
    assert ready.status_code == 503
    assert ready.json()["status"] == "not_ready" and ready.json()["upstream_circuit"] == "open"
    health = httpx.get(f"{proxy.url}/healthz")
    assert health.status_code == 200 and health.json()["upstream_circuit"] == "open"


def test_readyz_is_503_while_a_used_store_is_down(fake, start_proxy):
    proxy = start_proxy({"policies": policies_off("poisoning")})
    ready = httpx.get(f"{proxy.url}/readyz")
    assert ready.status_code == 200 and ready.json()["store"] == "ok"

    def down() -> bool:
        raise ConnectionError("chroma is gone")

    proxy.app.state.services.store.heartbeat = down
    ready = httpx.get(f"{proxy.url}/readyz")
    assert ready.status_code == 503
    assert ready.json()["status"] == "not_ready" and ready.json()["store"] == "down"
    assert httpx.get(f"{proxy.url}/healthz").status_code == 200
