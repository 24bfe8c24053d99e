"""With telemetry.otlp_endpoint set, traces and metrics reach an OTLP/HTTP collector."""

from __future__ import annotations

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ctxwarden.proxy.local_server import LocalServer
from tests.conftest import openai_client, policies_off


def test_traces_and_metrics_are_exported_over_otlp_http(fake, start_proxy):
    received: dict[str, list[bytes]] = {}

    async def collect(request: Request) -> Response:
        received.setdefault(request.url.path, []).append(await request.body())
        return Response(b"", media_type="application/x-protobuf")

    collector = LocalServer(Starlette(routes=[Route("/v1/{kind}", collect, methods=["POST"])])).start()
    try:
        proxy = start_proxy({"policies": policies_off(), "telemetry": {"otlp_endpoint": collector.url}})
        openai_client(proxy).chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
        proxy.stop()  # shutdown flushes the batch span processor and the metric reader
    finally:
        collector.stop()
    assert received.get("/v1/traces") and received.get("/v1/metrics")
    spans = []
    for blob in received["/v1/traces"]:
        export = ExportTraceServiceRequest.FromString(blob)
        spans += [s.name for rs in export.resource_spans for ss in rs.scope_spans for s in ss.spans]
    assert "chat gpt-4o" in spans and "upstream chat" in spans
