"""OpenTelemetry traces, the metrics facade, Prometheus text at /metrics, OTLP/HTTP export.

Metrics are aggregated in process (`metrics.Metrics`) and rendered by prometheus_client at
/metrics; with `telemetry.otlp_endpoint` set, every measurement is mirrored to an OTel instrument
(periodic OTLP export) and spans go to a batch span processor. Spans are built only when
something receives them (an OTLP endpoint or a span processor). Everything is per app instance
(not global), so several proxies in one process (tests, the demo) do not mix their figures.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from opentelemetry.sdk.metrics import AlwaysOffExemplarFilter, MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import NoOpTracer

from .metrics import Metrics, render

log = logging.getLogger("ctxwarden.telemetry")


class Telemetry:
    def __init__(
        self,
        service_name: str = "ctxwarden",
        otlp_endpoint: str | None = None,
        span_processors: list[SpanProcessor] | None = None,
    ) -> None:
        resource = Resource.create({"service.name": service_name})
        readers: list[MetricReader] = []
        self.tracer_provider = TracerProvider(resource=resource)
        if otlp_endpoint:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            base = otlp_endpoint.rstrip("/")
            readers.append(PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=f"{base}/v1/metrics")))
            self.tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{base}/v1/traces")))
        for processor in span_processors or []:
            self.tracer_provider.add_span_processor(processor)
        # No exemplars: they cost a reservoir offer per measurement on the request path.
        self.meter_provider = MeterProvider(resource=resource, metric_readers=readers, exemplar_filter=AlwaysOffExemplarFilter())
        self.exported = bool(otlp_endpoint or span_processors)
        # Spans nobody receives (no OTLP endpoint, no processor) are not built: a non-recording tracer
        # still carries the trace context, and the request path skips ~20 µs of span bookkeeping per span.
        self.tracer = self.tracer_provider.get_tracer("ctxwarden") if self.exported else NoOpTracer()
        self.metrics = Metrics(_OTelMirror(self.meter_provider) if readers else None)
        self._registry = self.metrics.registry()

    def snapshot(self) -> list[dict[str, Any]]:
        """Every metric point now: [{name, kind, attributes, value | count/sum/bounds/buckets}]."""
        return self.metrics.snapshot()

    def value(self, name: str, **attributes: Any) -> float:
        """Sum of a counter (or count of a histogram) over points matching `attributes` — for tests and admin."""
        total = 0.0
        for p in self.snapshot():
            if p["name"] != name or any(p["attributes"].get(k) != v for k, v in attributes.items()):
                continue
            total += p["count"] if p["kind"] == "histogram" else p["value"]
        return total

    def prometheus_text(self) -> str:
        return render(self._registry).decode("utf-8")

    def shutdown(self) -> None:
        for shut in (self.meter_provider.shutdown, self.tracer_provider.shutdown):
            try:
                shut()
            except Exception:  # exporters may fail at exit; never crash shutdown
                log.debug("telemetry shutdown failed", exc_info=True)


class _OTelMirror:
    """Hands each measurement to an OpenTelemetry instrument too, for the OTLP exporter."""

    def __init__(self, provider: MeterProvider) -> None:
        self._meter = provider.get_meter("ctxwarden")
        self._instruments: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()

    def __call__(self, kind: str, name: str, value: float, attributes: dict[str, Any]) -> None:
        key = (kind, name)
        inst = self._instruments.get(key)
        if inst is None:
            with self._lock:
                inst = self._instruments.get(key)
                if inst is None:
                    create = {"counter": self._meter.create_counter, "histogram": self._meter.create_histogram,
                              "gauge": self._meter.create_gauge}[kind]
                    inst = self._instruments[key] = create(name)
        if kind == "counter":
            inst.add(value, attributes)
        elif kind == "histogram":
            inst.record(value, attributes)
        else:
            inst.set(value, attributes)
