"""OpenTelemetry traces, the metrics facade, Prometheus text at /metrics, OTLP/HTTP or console export.

Metrics are aggregated in process (`metrics.Metrics`) and rendered by prometheus_client at
/metrics. `telemetry.exporter` chooses where spans and metrics go besides: `otlp` (to
`telemetry.otlp_endpoint`, the default when it is set), `console` (printed on stderr by the SDK's
console exporters, for a first look) or `none` (the default without an endpoint). With an exporter,
every measurement is mirrored to an OTel instrument (periodic export) under the same base-unit
name, and spans go to a batch span processor. Spans are built only when something receives them
(an exporter or a span processor). Everything is per app instance (not global), so several proxies
in one process (tests, the demo) do not mix their figures.
"""

from __future__ import annotations

import logging
import sys
import threading
from typing import Any

from opentelemetry.sdk.metrics import AlwaysOffExemplarFilter, MeterProvider
from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
from opentelemetry.trace import NoOpTracer

from .metrics import Metrics, base_unit, buckets_for, render

log = logging.getLogger("ctxwarden.telemetry")


EXPORTERS = ("otlp", "console", "none")
CONSOLE_SPAN_DELAY_MS = 1000  # console spans show up within a second, written off the event loop


class Telemetry:
    def __init__(
        self,
        service_name: str = "ctxwarden",
        otlp_endpoint: str | None = None,
        span_processors: list[SpanProcessor] | None = None,
        exporter: str | None = None,
    ) -> None:
        """`exporter`: otlp | console | none; None: otlp when `otlp_endpoint` is set, else none."""
        exporter = exporter or ("otlp" if otlp_endpoint else "none")
        if exporter not in EXPORTERS or exporter == "otlp" and not otlp_endpoint:
            raise ValueError(f"telemetry.exporter {exporter!r}: one of otlp (with otlp_endpoint), console, none")
        resource = Resource.create({"service.name": service_name})
        self.tracer_provider = TracerProvider(resource=resource)
        readers = _export(exporter, otlp_endpoint, self.tracer_provider)
        for processor in span_processors or []:
            self.tracer_provider.add_span_processor(processor)
        # No exemplars: they cost a reservoir offer per measurement on the request path.
        self.meter_provider = MeterProvider(resource=resource, metric_readers=readers, exemplar_filter=AlwaysOffExemplarFilter())
        self.exporter = exporter
        self.exported = exporter != "none" or bool(span_processors)
        # Spans nobody receives (no exporter, no processor) are not built: a non-recording tracer
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
        name = base_unit(name)[0]  # `…_ms` is kept as `…_seconds`
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


def _export(exporter: str, otlp_endpoint: str | None, tracer_provider: TracerProvider) -> list[MetricReader]:
    """Adds the span processor of `exporter` to `tracer_provider`; returns its metric readers."""
    if exporter == "otlp":
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        base = (otlp_endpoint or "").rstrip("/")
        tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{base}/v1/traces")))
        return [PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=f"{base}/v1/metrics"))]
    if exporter == "console":  # stderr: stdout may be the output of a command
        tracer_provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter(out=_Stderr()),
                                                              schedule_delay_millis=CONSOLE_SPAN_DELAY_MS))
        return [PeriodicExportingMetricReader(ConsoleMetricExporter(out=_Stderr()))]
    return []


class _Stderr:
    """sys.stderr as it is when written to (not when the exporter was made), so a redirection holds."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


class _OTelMirror:
    """Hands each measurement to an OpenTelemetry instrument too, for the exporter. Names and values
    are the ones the metrics facade keeps (durations in seconds, unit `s`); histograms get its buckets."""

    def __init__(self, provider: MeterProvider) -> None:
        self._meter = provider.get_meter("ctxwarden")
        self._instruments: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()

    def _create(self, kind: str, name: str) -> Any:
        unit = "s" if name.endswith("_seconds") or name.startswith("gen_ai.") and name.endswith(".duration") else \
            "{token}" if name == "gen_ai.client.token.usage" else ""
        if kind == "histogram":
            return self._meter.create_histogram(name, unit=unit, explicit_bucket_boundaries_advisory=buckets_for(name))
        return {"counter": self._meter.create_counter, "gauge": self._meter.create_gauge}[kind](name, unit=unit)

    def __call__(self, kind: str, name: str, value: float, attributes: dict[str, Any]) -> None:
        key = (kind, name)
        inst = self._instruments.get(key)
        if inst is None:
            with self._lock:
                inst = self._instruments.get(key)
                if inst is None:
                    inst = self._instruments[key] = self._create(kind, name)
        if kind == "counter":
            inst.add(value, attributes)
        elif kind == "histogram":
            inst.record(value, attributes)
        else:
            inst.set(value, attributes)
