"""Issue 43, held-out hardening checks on telemetry conventions (fault 7), through the real server:
the CLIENT span of a streamed upstream call names the answering model (`gen_ai.response.model`) on
every API and relay mode, and the GenAI operation duration is exported to Prometheus with the unit
suffix a time histogram needs (`gen_ai_client_operation_duration_seconds`)."""

from __future__ import annotations

import httpx
import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import policies_off
from tests.test_poisoning_e2e import admin_key, load_kb  # noqa: F401 (admin_key: autouse)

PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}
MODEL = {"chat": "gpt-4o", "responses": "gpt-4o", "messages": "claude-x"}

MODES = {
    "policies-off": {"policies": policies_off()},  # pass-through
    "default": {},  # default policies, empty knowledge base
    "kb": {"policies": policies_off("poisoning")},  # a knowledge base: the stream is gated
}


def body_for(api: str, **extra) -> dict:
    if api == "chat":
        return {"model": MODEL[api], "messages": [{"role": "user", "content": "hi there"}], **extra}
    if api == "responses":
        return {"model": MODEL[api], "input": "hi there", **extra}
    return {"model": MODEL[api], "max_tokens": 20, "messages": [{"role": "user", "content": "hi there"}], **extra}


def client_span(exporter: InMemorySpanExporter, model: str):
    spans = [s for s in exporter.get_finished_spans() if s.name == f"chat {model}"]
    assert len(spans) == 1, [s.name for s in exporter.get_finished_spans()]
    return spans[0]


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("api", list(PATHS))
def test_a_streamed_calls_client_span_names_the_response_model(fake, start_proxy, api, mode):
    config = dict(MODES[mode])
    if api == "messages":
        config["upstream"] = {"anthropic": {"base_url": f"{fake.url}/v1", "api_key_env": None}}
    exporter = InMemorySpanExporter()
    proxy = start_proxy(config, span_processors=[SimpleSpanProcessor(exporter)])
    if mode == "kb":
        load_kb(proxy)
    with httpx.Client(timeout=30) as client:
        with client.stream("POST", f"{proxy.url}{PATHS[api]}", json=body_for(api, stream=True)) as r:
            assert r.status_code == 200
            r.read()
        client.get(f"{proxy.url}/healthz")  # the stream's span ends after its last byte; let it finish
    span = client_span(exporter, MODEL[api])
    assert span.attributes["gen_ai.request.model"] == MODEL[api]
    assert span.attributes.get("gen_ai.response.model") == MODEL[api], dict(span.attributes)


@pytest.mark.parametrize("usage", [False, True])
def test_a_streamed_chat_span_names_the_model_with_or_without_usage(fake, start_proxy, usage):
    exporter = InMemorySpanExporter()
    proxy = start_proxy({"policies": policies_off()}, span_processors=[SimpleSpanProcessor(exporter)])
    fake.reply(content="word " * 2000)  # a long answer: the model is named far before the stream's end
    extra = {"stream_options": {"include_usage": True}} if usage else {}
    with httpx.stream("POST", f"{proxy.url}/v1/chat/completions", timeout=30, json=body_for("chat", stream=True, **extra)) as r:
        r.read()
    httpx.get(f"{proxy.url}/healthz")
    assert client_span(exporter, "gpt-4o").attributes.get("gen_ai.response.model") == "gpt-4o"


def test_the_operation_duration_is_exported_in_seconds_by_name(fake, start_proxy):
    proxy = start_proxy({"policies": policies_off()})
    with httpx.Client(timeout=30) as client:
        client.post(f"{proxy.url}/v1/chat/completions", json=body_for("chat"))
        with client.stream("POST", f"{proxy.url}/v1/chat/completions", json=body_for("chat", stream=True)) as r:
            r.read()
        text = client.get(f"{proxy.url}/metrics").text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert "gen_ai_client_operation_duration" not in families
    duration = families["gen_ai_client_operation_duration_seconds"]
    assert duration.type == "histogram" and "seconds" in duration.documentation
    counts = [s.value for s in duration.samples if s.name == "gen_ai_client_operation_duration_seconds_count"]
    assert sum(counts) == 2
    assert "# TYPE gen_ai_client_operation_duration_seconds histogram" in text
    # the token usage histogram keeps its name (its unit, {token}, is an annotation, not a suffix)
    assert "gen_ai_client_token_usage" in families
