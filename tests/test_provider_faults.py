"""Provider failures through litellm (issue 13, A.12): a local Anthropic-shaped server stands in
for the provider; any failure of the library is a clean 502, a client cannot redirect the call."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ctxwarden.proxy.local_server import free_port
from tests.conftest import openai_client, policies_off
from tests.test_upstream_faults import HI, chunk, sse_events

# ---------------------------------------------------------------------- 12. providers through litellm

CLAUDE = "anthropic/claude-3-5-sonnet-20240620"
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]


@pytest.fixture
def anthropic_api(hostile, monkeypatch):
    """A local Anthropic-shaped server; litellm is pointed at it through ANTHROPIC_API_BASE."""
    seen: list[dict[str, Any]] = []

    async def messages(request: Request) -> Response:
        body = await request.json()
        seen.append(body)
        content: list[dict[str, Any]] = [{"type": "text", "text": "Let me look."}]
        if body.get("tools"):
            content.append({"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}})
        return JSONResponse({"id": "msg_1", "type": "message", "role": "assistant", "model": body["model"],
                             "content": content, "stop_reason": "tool_use" if body.get("tools") else "end_turn",
                             "stop_sequence": None, "usage": {"input_tokens": 12, "output_tokens": 3}})

    server = hostile(messages)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("ANTHROPIC_API_BASE", f"{server.url}/v1/messages")
    return seen


def test_a_provider_model_with_tools_answers(start_proxy, anthropic_api):
    proxy = start_proxy({"policies": policies_off()})
    r = openai_client(proxy).chat.completions.create(model=CLAUDE, messages=HI, tools=TOOLS, max_tokens=50)
    call = r.choices[0].message.tool_calls[0]
    assert (call.function.name, json.loads(call.function.arguments)) == ("get_weather", {"city": "Paris"})
    assert anthropic_api and anthropic_api[0]["tools"][0]["name"] == "get_weather"
    assert not any(key.startswith("_") for key in anthropic_api[0])  # litellm's own switches stay in litellm


def test_client_cannot_redirect_a_provider_call(start_proxy, anthropic_api, hostile):
    stolen: list[str] = []

    async def thief(request: Request) -> Response:
        stolen.append(request.headers.get("x-api-key", ""))
        return JSONResponse({}, status_code=400)

    elsewhere = hostile(thief)
    proxy = start_proxy({"policies": policies_off()})
    r = httpx.post(f"{proxy.url}/v1/chat/completions", json={
        "model": CLAUDE, "messages": HI, "max_tokens": 20, "api_base": f"{elsewhere.url}/v1/messages",
        "base_url": f"{elsewhere.url}/v1", "api_key": "sk-client", "extra_headers": {"x-evil": "1"}})
    assert r.status_code == 200, r.text
    assert stolen == [] and len(anthropic_api) == 1


def test_an_unreachable_provider_is_a_502(start_proxy, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("ANTHROPIC_API_BASE", f"http://127.0.0.1:{free_port()}/v1/messages")
    proxy = start_proxy({"policies": policies_off()})
    r = httpx.post(f"{proxy.url}/v1/chat/completions", json={"model": CLAUDE, "messages": HI, "max_tokens": 5}, timeout=30)
    assert r.status_code == 502, r.text
    assert r.json()["error"]["code"] == "upstream_unavailable"
    assert "Traceback" not in r.text


@pytest.mark.parametrize("exc", [ImportError("No module named 'mcp'"), RuntimeError("library bug\nTraceback (most recent call last):\n  x")])
def test_any_provider_library_failure_is_a_clean_502(start_proxy, monkeypatch, exc):
    import litellm

    async def broken(**kwargs: Any) -> Any:
        raise exc

    monkeypatch.setattr(litellm, "acompletion", broken)
    proxy = start_proxy({"policies": policies_off()})
    r = httpx.post(f"{proxy.url}/v1/chat/completions", json={"model": CLAUDE, "messages": HI, "max_tokens": 5})
    assert r.status_code == 502, r.text
    error = r.json()["error"]
    assert error["code"] == "upstream_error" and type(exc).__name__ in error["message"]
    assert "Traceback" not in error["message"] and "\n" not in error["message"]


def test_a_provider_stream_that_fails_midway_ends_with_an_error_event(start_proxy, monkeypatch):
    import litellm

    class Chunk:
        def model_dump(self, **kwargs: Any) -> dict[str, Any]:
            return json.loads(chunk("Hi")[6:])

    async def failing_stream():
        yield Chunk()
        raise RuntimeError("provider library broke mid-stream")

    async def acompletion(**kwargs: Any) -> Any:
        return failing_stream()

    monkeypatch.setattr(litellm, "acompletion", acompletion)
    proxy = start_proxy({"policies": policies_off()})
    with httpx.stream("POST", f"{proxy.url}/v1/chat/completions",
                      json={"model": CLAUDE, "messages": HI, "stream": True}) as r:
        body = r.read()
    events = sse_events(body)
    assert events[0]["choices"][0]["delta"]["content"] == "Hi"
    assert events[-1]["error"]["code"] == "upstream_error" and "RuntimeError" in events[-1]["error"]["message"]
