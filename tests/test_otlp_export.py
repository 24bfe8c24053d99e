"""Traces and metrics over OTLP/HTTP, read back by a real receiver: span kinds, the caller's trace
continued from `traceparent`, the GenAI attributes on plain and streamed requests, ERROR on failures."""

from __future__ import annotations

import httpx
import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ctxwarden.proxy.local_server import LocalServer
from tests.conftest import openai_client, policies_off

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
HI = [{"role": "user", "content": "hi there"}]


@pytest.fixture
def collector():
    received: dict[str, list[bytes]] = {}

    async def collect(request: Request) -> Response:
        received.setdefault(request.url.path, []).append(await request.body())
        return Response(b"", media_type="application/x-protobuf")

    server = LocalServer(Starlette(routes=[Route("/v1/{kind}", collect, methods=["POST"])])).start()
    server.received = received  # type: ignore[attr-defined]
    yield server
    server.stop()


def spans_of(received: dict[str, list[bytes]]) -> list[Span]:
    out = []
    for blob in received.get("/v1/traces", []):
        export = ExportTraceServiceRequest.FromString(blob)
        out += [s for rs in export.resource_spans for ss in rs.scope_spans for s in ss.spans]
    return out


def metrics_of(received: dict[str, list[bytes]]) -> dict:
    out = {}
    for blob in received.get("/v1/metrics", []):
        export = ExportMetricsServiceRequest.FromString(blob)
        out |= {m.name: m for rm in export.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    return out


def attrs(span: Span) -> dict:
    out = {}
    for kv in span.attributes:
        v = kv.value
        out[kv.key] = v.string_value if v.HasField("string_value") else v.int_value if v.HasField("int_value") else \
            v.bool_value if v.HasField("bool_value") else v.double_value
    return out


def test_spans_continue_the_callers_trace_and_follow_the_genai_conventions(fake, start_proxy, collector):
    proxy = start_proxy({"policies": policies_off("loops"), "telemetry": {"otlp_endpoint": collector.url}})
    headers = {"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"}
    httpx.post(f"{proxy.url}/v1/chat/completions", json={"model": "gpt-4o", "messages": HI}, headers=headers)
    with openai_client(proxy).chat.completions.create(model="gpt-4o", messages=HI, stream=True) as stream:
        chunks = list(stream)
    proxy.stop()  # shutdown flushes the batch span processor and the metric reader
    assert collector.received.get("/v1/metrics")
    spans = spans_of(collector.received)
    servers = [s for s in spans if s.kind == Span.SPAN_KIND_SERVER]
    clients = [s for s in spans if s.kind == Span.SPAN_KIND_CLIENT]
    assert [s.name for s in servers] == ["POST /v1/chat/completions"] * 2
    assert [s.name for s in clients] == ["chat gpt-4o"] * 2
    continued = next(s for s in servers if s.trace_id.hex() == TRACE_ID)
    assert continued.parent_span_id.hex() == PARENT_ID  # a child of the caller's span
    plain = next(c for c in clients if c.trace_id == continued.trace_id)
    assert plain.parent_span_id == continued.span_id
    policy = next(s for s in spans if s.name == "ctxwarden.policy loops" and s.trace_id == continued.trace_id)
    assert policy.parent_span_id == continued.span_id and policy.kind == Span.SPAN_KIND_INTERNAL
    for client in clients:  # plain and streamed alike
        a = attrs(client)
        assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.provider.name"] == "openai"
        assert a["gen_ai.request.model"] == "gpt-4o" and a["gen_ai.response.model"] == "gpt-4o"
        assert a["gen_ai.usage.input_tokens"] > 0 and a["gen_ai.usage.output_tokens"] > 0
        assert client.status.code != Status.STATUS_CODE_ERROR
    # the proxy asked the stream for usage; the client did not, so it never sees the usage chunk
    assert "stream_options" in fake.chat_requests[-1] and all(c.usage is None for c in chunks)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "You said: hi there"


def test_exported_metrics_have_base_unit_names_and_seconds(fake, start_proxy, collector):
    proxy = start_proxy({"policies": policies_off("loops"), "telemetry": {"otlp_endpoint": collector.url}})
    httpx.post(f"{proxy.url}/v1/chat/completions", json={"model": "gpt-4o", "messages": HI})
    proxy.stop()
    metrics = metrics_of(collector.received)
    assert not [name for name in metrics if name.endswith("_ms")]  # the same names as /metrics, in seconds
    usage = metrics["gen_ai.client.token.usage"]
    assert usage.unit == "{token}"
    kinds = {a.value.string_value for p in usage.histogram.data_points for a in p.attributes if a.key == "gen_ai.token.type"}
    assert kinds == {"input", "output"} and all(p.sum > 0 for p in usage.histogram.data_points)
    for name in ("ctxwarden.policy.duration_seconds", "ctxwarden.request.duration_seconds",
                 "gen_ai.client.operation.duration"):
        metric = metrics[name]
        assert metric.unit == "s", name
        point = metric.histogram.data_points[0]
        assert 0 < point.sum < 30 and point.count >= 1, (name, point.sum)  # seconds, not milliseconds
        assert 0.001 in point.explicit_bounds or 0.01 in point.explicit_bounds, name  # buckets for seconds


def test_a_failed_upstream_call_is_an_error_on_both_spans(fake, start_proxy, collector):
    proxy = start_proxy({"policies": policies_off(), "telemetry": {"otlp_endpoint": collector.url},
                         "upstream": {"retries": 0}})
    fake.script.append({"status": 500, "json": {"error": {"message": "boom", "type": "server_error"}}})
    answer = httpx.post(f"{proxy.url}/v1/chat/completions", json={"model": "gpt-4o", "messages": HI})
    proxy.stop()
    assert answer.status_code == 500
    spans = {s.kind: s for s in spans_of(collector.received)}
    client, server = spans[Span.SPAN_KIND_CLIENT], spans[Span.SPAN_KIND_SERVER]
    assert client.status.code == Status.STATUS_CODE_ERROR and attrs(client)["error.type"] == "500"
    assert server.status.code == Status.STATUS_CODE_ERROR and attrs(server)["http.response.status_code"] == 500


def test_a_client_who_asked_for_usage_still_gets_it(fake, start_proxy):
    proxy = start_proxy({"policies": policies_off()})
    with openai_client(proxy).chat.completions.create(model="gpt-4o", messages=HI, stream=True,
                                                       stream_options={"include_usage": True}) as stream:
        chunks = list(stream)
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0


def test_a_stream_cut_by_the_upstream_is_an_error_on_its_client_span(fake, start_proxy, collector):
    proxy = start_proxy({"policies": policies_off(), "telemetry": {"otlp_endpoint": collector.url},
                         "upstream": {"retries": 0}})
    fake.script.append({"cut_after": 2, "content": "a long answer that never ends " * 5})
    headers = {"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"}
    with httpx.stream("POST", f"{proxy.url}/v1/chat/completions", headers=headers,
                      json={"model": "gpt-4o", "messages": HI, "stream": True}) as r:
        body = "".join(r.iter_text())
    proxy.stop()
    assert "upstream_stream_cut" in body
    spans = {s.kind: s for s in spans_of(collector.received)}
    client, server = spans[Span.SPAN_KIND_CLIENT], spans[Span.SPAN_KIND_SERVER]
    assert client.trace_id.hex() == TRACE_ID and client.parent_span_id == server.span_id
    assert server.parent_span_id.hex() == PARENT_ID
    assert client.status.code == Status.STATUS_CODE_ERROR and attrs(client)["error.type"] == "upstream_stream_cut"
    assert attrs(client)["gen_ai.request.model"] == "gpt-4o" and attrs(client)["gen_ai.provider.name"] == "openai"


def test_each_policy_span_carries_its_decision(fake, start_proxy, collector):
    from ctxwarden.proxy.demo import _call

    proxy = start_proxy({"policies": {**policies_off("loops"), "loops": {"enabled": True, "action": "stop"}}, "telemetry": {"otlp_endpoint": collector.url}})
    looping = [{"role": "user", "content": "Weather in Paris?"},
               *[m for i in range(3) for m in (_call(f"w{i}", "get_weather", {"city": "Paris"}),
                                               {"role": "tool", "tool_call_id": f"w{i}", "content": "error: timeout"})]]
    r = httpx.post(f"{proxy.url}/v1/chat/completions", json={"model": "gpt-4o", "messages": looping})
    proxy.stop()
    assert r.status_code == 200 and "loops.stop" in r.headers["x-ctxwarden-actions"]
    spans = spans_of(collector.received)
    server = next(s for s in spans if s.kind == Span.SPAN_KIND_SERVER)
    policies = {attrs(s)["ctxwarden.policy"]: s for s in spans if s.name.startswith("ctxwarden.policy ")}
    assert {"loops", "budget"} <= set(policies) and all(s.parent_span_id == server.span_id for s in policies.values())
    loops = policies["loops"]
    assert attrs(loops)["ctxwarden.verdict"] == "Respond" and [e.name for e in loops.events] == ["loops.stop"]
    assert "ctxwarden.verdict" not in attrs(policies["budget"]) and not policies["budget"].events  # it let it pass
    assert attrs(loops)["ctxwarden.decision"] == "Respond" and attrs(policies["budget"])["ctxwarden.decision"] == "pass"
    assert not [s for s in spans if s.kind == Span.SPAN_KIND_CLIENT]  # answered by the proxy: no upstream call
