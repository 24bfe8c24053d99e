"""The transparent proxy end to end: the official SDK → the real server → a local fake upstream."""

from __future__ import annotations

import json
import time

import httpx
import openai
import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ctxwarden.proxy.local_server import free_port
from tests.conftest import openai_client, policies_off

HI = [{"role": "user", "content": "hi"}]


def test_plain_answer_comes_back_unchanged_with_our_headers(fake, start_proxy):
    proxy = start_proxy({"policies": policies_off()})
    raw = openai_client(proxy).chat.completions.with_raw_response.create(model="gpt-4o", messages=HI)
    completion = raw.parse()
    assert completion.choices[0].message.content == "You said: hi"
    assert completion.system_fingerprint == "fp_fake"
    assert len(raw.headers["x-ctxwarden-request-id"]) == 24
    assert raw.headers["x-ctxwarden-actions"] == ""


def test_untouched_request_is_forwarded_byte_for_byte(fake, start_proxy):
    proxy = start_proxy()  # default policies on: nothing to do for a short request
    body = b'{"model":"gpt-4o",  "messages":[{"role":"user","content":"caf\\u00e9"}], "x_vendor_field": {"keep": [1, 2.50]}}'
    r = httpx.post(f"{proxy.url}/v1/chat/completions", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 200
    assert fake.received[-1].raw == body


def test_every_field_we_do_not_act_on_is_forwarded(fake, start_proxy):
    proxy = start_proxy({"policies": policies_off()})
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
                                               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
    openai_client(proxy).chat.completions.create(
        model="gpt-4o", messages=HI, tools=tools, tool_choice={"type": "function", "function": {"name": "get_weather"}},
        response_format={"type": "json_object"}, n=2, seed=7, logprobs=True, top_logprobs=2, temperature=0.2,
        user="u-1", metadata={"k": "v"},
    )
    sent = fake.chat_requests[-1]
    assert sent["tools"] == tools
    assert sent["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert sent["response_format"] == {"type": "json_object"}
    assert (sent["n"], sent["seed"], sent["logprobs"], sent["top_logprobs"], sent["temperature"]) == (2, 7, True, 2, 0.2)
    assert sent["user"] == "u-1" and sent["metadata"] == {"k": "v"}


def test_tool_calls_come_back(fake, start_proxy):
    proxy = start_proxy({"policies": policies_off()})
    fake.reply(tool_calls=[{"name": "get_weather", "arguments": '{"city": "Paris"}'}])
    r = openai_client(proxy).chat.completions.create(model="gpt-4o", messages=HI)
    call = r.choices[0].message.tool_calls[0]
    assert (call.function.name, json.loads(call.function.arguments)) == ("get_weather", {"city": "Paris"})
    assert r.choices[0].finish_reason == "tool_calls"


def test_stream_with_usage_passes_every_chunk(fake, start_proxy):
    proxy = start_proxy({"policies": policies_off()})
    stream = openai_client(proxy).chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "one two three"}], stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "You said: one two three"
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) == 5
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 5


def test_stream_response_carries_our_headers(fake, start_proxy):
    proxy = start_proxy({"policies": policies_off()})
    with httpx.stream("POST", f"{proxy.url}/v1/chat/completions",
                      json={"model": "gpt-4o", "messages": HI, "stream": True}) as r:
        body = r.read()
    assert r.headers["content-type"].startswith("text/event-stream")
    assert "x-ctxwarden-request-id" in r.headers and "x-ctxwarden-actions" in r.headers
    assert body.endswith(b"data: [DONE]\n\n")


@pytest.mark.parametrize(
    "status, error_class",
    [(400, openai.BadRequestError), (401, openai.AuthenticationError), (429, openai.RateLimitError),
     (500, openai.InternalServerError)],
)
def test_upstream_errors_are_relayed_with_status_and_body(fake, start_proxy, status, error_class):
    proxy = start_proxy({"policies": policies_off()})
    fake.reply(status=status, json={"error": {"message": f"upstream says {status}", "type": "x", "code": f"c{status}", "param": None}},
               headers={"retry-after": "30"} if status == 429 else None)
    with pytest.raises(error_class) as info:
        openai_client(proxy).chat.completions.create(model="gpt-4o", messages=HI)
    assert info.value.status_code == status
    assert info.value.body["message"] == f"upstream says {status}"
    assert info.value.body["code"] == f"c{status}"
    if status == 429:
        assert info.value.response.headers["retry-after"] == "30"


def test_non_json_upstream_error_is_wrapped_in_openai_shape(fake, start_proxy):
    proxy = start_proxy({"policies": policies_off()})
    fake.reply(status=502, raw="<html>bad gateway</html>", content_type="text/html")
    r = httpx.post(f"{proxy.url}/v1/chat/completions", json={"model": "gpt-4o", "messages": HI})
    assert r.status_code == 502
    err = r.json()["error"]
    assert err["code"] == "upstream_error" and "bad gateway" in err["message"]


def test_retries_after_a_503(fake, start_proxy):
    proxy = start_proxy({"policies": policies_off(), "upstream": {"retries": 1}})
    fake.reply(status=503, json={"error": {"message": "busy"}})
    r = openai_client(proxy).chat.completions.create(model="gpt-4o", messages=HI)
    assert r.choices[0].message.content == "You said: hi"
    assert len(fake.chat_requests) == 2


def test_connection_refused_is_a_502(start_proxy):
    proxy = start_proxy({"policies": policies_off(), "upstream": {"base_url": f"http://127.0.0.1:{free_port()}/v1"}})
    with pytest.raises(openai.APIStatusError) as info:
        openai_client(proxy).chat.completions.create(model="gpt-4o", messages=HI)
    assert info.value.status_code == 502
    assert info.value.body["code"] == "upstream_unavailable"
    assert "Could not reach the upstream" in info.value.body["message"]


def test_upstream_timeout_is_a_504(fake, start_proxy):
    proxy = start_proxy({"policies": policies_off(), "upstream": {"timeout_s": 0.3}})
    fake.reply(delay_s=1.5, content="late")
    with pytest.raises(openai.APIStatusError) as info:
        openai_client(proxy).chat.completions.create(model="gpt-4o", messages=HI)
    assert info.value.status_code == 504
    assert info.value.body["code"] == "upstream_timeout"


def test_stream_cut_midway_ends_with_an_error_not_a_hang(fake, start_proxy):
    proxy = start_proxy({"policies": policies_off()})
    fake.reply(content="one two three four five six", cut_after=3)
    stream = openai_client(proxy, timeout=10).chat.completions.create(model="gpt-4o", messages=HI, stream=True)
    received = []
    with pytest.raises(openai.APIError) as info:
        for chunk in stream:
            received.append(chunk.choices[0].delta.content or "")
    assert "".join(received) == "one two"
    assert "before it was complete" in str(info.value) or "stream failed" in str(info.value)


def test_circuit_breaker_opens_fails_fast_and_recovers(fake, start_proxy):
    proxy = start_proxy({"policies": policies_off(),
                         "upstream": {"circuit_breaker": {"failure_threshold": 2, "cooldown_s": 0.5}}})
    client = openai_client(proxy)
    for _ in range(2):
        fake.reply(status=500, json={"error": {"message": "boom"}})
        with pytest.raises(openai.InternalServerError):
            client.chat.completions.create(model="gpt-4o", messages=HI)
    with pytest.raises(openai.APIStatusError) as info:
        client.chat.completions.create(model="gpt-4o", messages=HI)
    assert info.value.status_code == 503 and info.value.body["code"] == "upstream_unavailable"
    assert len(fake.chat_requests) == 2  # failed fast: the upstream was not called
    health = httpx.get(f"{proxy.url}/healthz")  # liveness: the process answers, the breaker is only shown
    assert health.status_code == 200 and health.json()["upstream_circuit"] == "open"
    assert httpx.get(f"{proxy.url}/readyz").status_code == 503
    time.sleep(0.6)
    assert client.chat.completions.create(model="gpt-4o", messages=HI).choices[0].message.content == "You said: hi"
    assert httpx.get(f"{proxy.url}/healthz").json()["upstream_circuit"] == "closed"
    assert httpx.get(f"{proxy.url}/readyz").json()["status"] == "ready"


def test_budget_rejects_what_cannot_fit_with_the_numbers(fake, start_proxy):
    proxy = start_proxy({"policies": policies_off(), "models": {"tiny": {"context_window": 100}}})
    with pytest.raises(openai.BadRequestError) as info:
        openai_client(proxy).chat.completions.create(model="tiny", messages=[{"role": "user", "content": "word " * 200}])
    body = info.value.body
    assert body["code"] == "context_length_exceeded"
    assert "100-token context window" in body["message"] and "needs 2" in body["message"]
    assert fake.chat_requests == []


def test_budget_warn_is_reported_in_actions(fake, start_proxy):
    proxy = start_proxy({"policies": policies_off(), "models": {"small": {"context_window": 300}}})
    raw = openai_client(proxy).chat.completions.with_raw_response.create(
        model="small", messages=[{"role": "user", "content": "word " * 230}])
    assert "budget.warn" in raw.headers["x-ctxwarden-actions"].split(",")


def test_upstream_key_replaces_client_key_when_configured(fake, start_proxy, monkeypatch):
    monkeypatch.setenv("CTXW_TEST_UPSTREAM_KEY", "sk-upstream")
    proxy = start_proxy({"policies": policies_off(), "upstream": {"api_key_env": "CTXW_TEST_UPSTREAM_KEY"}})
    openai_client(proxy, api_key="sk-client").chat.completions.create(model="gpt-4o", messages=HI)
    assert fake.received[-1].headers["authorization"] == "Bearer sk-upstream"


def test_client_key_passes_through_when_no_key_configured(fake, start_proxy):
    proxy = start_proxy({"policies": policies_off()})
    openai_client(proxy, api_key="sk-client").chat.completions.create(
        model="gpt-4o", messages=HI, extra_headers={"x-ctxwarden-session": "s1"})
    headers = fake.received[-1].headers
    assert headers["authorization"] == "Bearer sk-client"
    assert "x-ctxwarden-session" not in headers


def test_models_are_relayed_and_health_and_metrics_answer(fake, start_proxy):
    proxy = start_proxy({"policies": policies_off()})
    client = openai_client(proxy)
    assert [m.id for m in client.models.list()] == ["gpt-4o", "gpt-4o-mini"]
    client.chat.completions.create(model="gpt-4o", messages=HI)
    assert httpx.get(f"{proxy.url}/healthz").status_code == 200
    text = httpx.get(f"{proxy.url}/metrics").text
    assert 'ctxwarden_requests_total{api="chat",model="gpt-4o",status="200",stream="False"} 1' in text
    assert "ctxwarden_request_duration_seconds_bucket" in text


@pytest.mark.parametrize(
    "body, status, fragment",
    [
        (b"{not json", 400, "not valid JSON"),
        (b"[1, 2]", 400, "must be a JSON object"),
        (b'{"messages": [{"role": "user", "content": "x"}]}', 400, "Missing required parameter: 'model'"),
        (b'{"model": "gpt-4o"}', 400, "Missing required parameter: 'messages'"),
        (b'{"model": "gpt-4o", "messages": "hi"}', 400, "'messages' must be an array"),
        (b'{"model": "gpt-4o", "messages": [{"role": "robot", "content": "x"}]}', 400, "messages[0].role is 'robot'"),
        (b'{"model": "gpt-4o", "messages": [{"role": "user", "content": 5}]}', 400, "messages[0].content must be"),
        (b'{"model": "gpt-4o", "messages": [{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "c9", "content": "r"}]}',
         400, "tool_call_id 'c9'"),
        (b'{"model": "gpt-4o", "stream": "yes", "messages": [{"role": "user", "content": "x"}]}', 400, "'stream' must be a boolean"),
    ],
)
def test_bad_requests_get_a_4xx_naming_the_problem(fake, start_proxy, body, status, fragment):
    proxy = start_proxy()
    r = httpx.post(f"{proxy.url}/v1/chat/completions", content=body, headers={"content-type": "application/json"})
    assert r.status_code == status
    error = r.json()["error"]
    assert fragment in error["message"]
    assert error["type"] == "invalid_request_error" and error["code"] == "invalid_request"
    assert fake.chat_requests == []


def test_body_over_the_limit_is_a_413(fake, start_proxy):
    proxy = start_proxy({"server": {"max_body_mb": 0.01}})
    r = httpx.post(f"{proxy.url}/v1/chat/completions", json={"model": "gpt-4o", "messages": [{"role": "user", "content": "x" * 20000}]})
    assert r.status_code == 413
    assert r.json()["error"]["code"] == "request_too_large"


def test_unknown_route_is_an_openai_shaped_404(start_proxy):
    proxy = start_proxy()
    r = httpx.get(f"{proxy.url}/nope")
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"


def test_spans_follow_genai_conventions(fake, start_proxy):
    exporter = InMemorySpanExporter()
    proxy = start_proxy({"models": {"small": {"context_window": 300}}}, span_processors=[SimpleSpanProcessor(exporter)])
    openai_client(proxy).chat.completions.create(model="small", messages=[{"role": "user", "content": "word " * 230}])
    spans = {s.name: s for s in exporter.get_finished_spans()}
    root = spans["POST /v1/chat/completions"]
    assert root.attributes["gen_ai.request.model"] == "small"
    assert root.attributes["ctxwarden.tokens.before"] == root.attributes["ctxwarden.tokens.after"] > 230
    assert "budget.warn" in root.attributes["ctxwarden.actions"]
    call = spans["chat small"]
    assert call.parent.span_id == root.context.span_id
    assert call.attributes["gen_ai.usage.output_tokens"] == 232  # the fake counts the words of "You said: word …"
    budget = spans["ctxwarden.policy budget"]
    assert budget.parent.span_id == root.context.span_id
    assert [e.name for e in budget.events] == ["budget.component_over", "budget.warn"]  # the query exceeds its 20% share


def test_the_response_model_is_read_from_a_long_plain_answer_too(fake, start_proxy):
    exporter = InMemorySpanExporter()
    proxy = start_proxy({"policies": policies_off()}, span_processors=[SimpleSpanProcessor(exporter)])
    fake.reply(content="word " * 3000)  # the answer's model is named before ~15 kB of content
    openai_client(proxy).chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    call = next(s for s in exporter.get_finished_spans() if s.name == "chat gpt-4o")
    assert call.attributes["gen_ai.response.model"] == "gpt-4o"
