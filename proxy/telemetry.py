"""OpenTelemetry: a tracer and a metrics facade, Prometheus text at /metrics, OTLP/HTTP export.

One source of truth: every metric goes to an OTel instrument. `/metrics` renders what an
in-memory reader collects as Prometheus text; with `telemetry.otlp_endpoint` set, a periodic
reader and a batch span processor also export over OTLP/HTTP. Providers are per app instance
(not global), so several proxies in one process (tests, the demo) do not mix their figures.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Any

from opentelemetry.sdk.metrics import AlwaysOffExemplarFilter, MeterProvider
from opentelemetry.sdk.metrics.export import Gauge as GaugeData
from opentelemetry.sdk.metrics.export import Histogram as HistogramData
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.metrics.export import Sum as SumData
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import NoOpTracer

log = logging.getLogger("ctxwarden.telemetry")

# Latency-friendly histogram buckets (milliseconds and small ratios both fit reasonably).
_BUCKETS = (0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000)


class Metrics:
    """Counters, histograms and gauges by name; instruments are created on first use."""

    def __init__(self, provider: MeterProvider) -> None:
        self._meter = provider.get_meter("ctxwarden")
        self._instruments: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()

    def _instrument(self, kind: str, name: str) -> Any:
        key = (kind, name)
        inst = self._instruments.get(key)
        if inst is None:
            with self._lock:
                inst = self._instruments.get(key)
                if inst is None:
                    if kind == "counter":
                        inst = self._meter.create_counter(name)
                    elif kind == "histogram":
                        inst = self._meter.create_histogram(name, explicit_bucket_boundaries_advisory=_BUCKETS)
                    else:
                        inst = self._meter.create_gauge(name)
                    self._instruments[key] = inst
        return inst

    def add(self, name: str, value: float = 1, **attributes: Any) -> None:
        self._instrument("counter", name).add(value, _clean(attributes))

    def record(self, name: str, value: float, **attributes: Any) -> None:
        self._instrument("histogram", name).record(value, _clean(attributes))

    def gauge(self, name: str, value: float, **attributes: Any) -> None:
        self._instrument("gauge", name).set(value, _clean(attributes))


def _clean(attributes: dict[str, Any]) -> dict[str, Any]:
    return {k: (v if isinstance(v, (str, bool, int, float)) else str(v)) for k, v in attributes.items() if v is not None}


class Telemetry:
    def __init__(
        self,
        service_name: str = "ctxwarden",
        otlp_endpoint: str | None = None,
        span_processors: list[SpanProcessor] | None = None,
    ) -> None:
        resource = Resource.create({"service.name": service_name})
        self.reader = InMemoryMetricReader()
        readers: list[MetricReader] = [self.reader]
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
        # Spans nobody receives (no OTLP endpoint, no processor) are not built: a non-recording tracer
        # still carries the trace context, and the request path skips ~20 µs of span bookkeeping per span.
        exported = bool(otlp_endpoint or span_processors)
        self.tracer = self.tracer_provider.get_tracer("ctxwarden") if exported else NoOpTracer()
        self.metrics = Metrics(self.meter_provider)

    def snapshot(self) -> list[dict[str, Any]]:
        """Every metric point now: [{name, kind, attributes, value | count/sum/buckets}]."""
        data = self.reader.get_metrics_data()
        points: list[dict[str, Any]] = []
        if data is None:
            return points
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    kind = type(metric.data)
                    for p in metric.data.data_points:
                        item: dict[str, Any] = {"name": metric.name, "attributes": dict(p.attributes or {})}
                        if kind is HistogramData:
                            item.update(kind="histogram", count=p.count, sum=p.sum,
                                        bounds=list(p.explicit_bounds), buckets=list(p.bucket_counts))
                        elif kind is SumData:
                            item.update(kind="counter", value=p.value)
                        elif kind is GaugeData:
                            item.update(kind="gauge", value=p.value)
                        else:
                            continue
                        points.append(item)
        return points

    def value(self, name: str, **attributes: Any) -> float:
        """Sum of a counter (or count of a histogram) over points matching `attributes` — for tests and admin."""
        total = 0.0
        for p in self.snapshot():
            if p["name"] != name or any(p["attributes"].get(k) != v for k, v in attributes.items()):
                continue
            total += p["count"] if p["kind"] == "histogram" else p["value"]
        return total

    def prometheus_text(self) -> str:
        lines: list[str] = []
        typed: set[str] = set()
        for p in self.snapshot():
            name = _prom_name(p["name"])
            labels = p["attributes"]
            if p["kind"] == "counter":
                name = name if name.endswith("_total") else f"{name}_total"
                _type_line(lines, typed, name, "counter")
                lines.append(f"{name}{_labels(labels)} {_num(p['value'])}")
            elif p["kind"] == "gauge":
                _type_line(lines, typed, name, "gauge")
                lines.append(f"{name}{_labels(labels)} {_num(p['value'])}")
            else:
                _type_line(lines, typed, name, "histogram")
                cumulative = 0
                for bound, count in zip([*p["bounds"], float("inf")], p["buckets"]):
                    cumulative += count
                    le = "+Inf" if bound == float("inf") else _num(bound)
                    lines.append(f"{name}_bucket{_labels({**labels, 'le': le})} {cumulative}")
                lines.append(f"{name}_sum{_labels(labels)} {_num(p['sum'])}")
                lines.append(f"{name}_count{_labels(labels)} {p['count']}")
        return "\n".join(lines) + "\n"

    def shutdown(self) -> None:
        for shut in (self.meter_provider.shutdown, self.tracer_provider.shutdown):
            try:
                shut()
            except Exception:  # exporters may fail at exit; never crash shutdown
                log.debug("telemetry shutdown failed", exc_info=True)


def _prom_name(name: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_:]", "_", name)


def _type_line(lines: list[str], typed: set[str], name: str, kind: str) -> None:
    if name not in typed:
        typed.add(name)
        lines.append(f"# TYPE {name} {kind}")


def _labels(attrs: dict[str, Any]) -> str:
    if not attrs:
        return ""
    def esc(v: Any) -> str:
        text = str(v)
        if not text.isascii():  # a lone surrogate must not make the whole page unencodable
            text = text.encode("utf-8", "backslashreplace").decode("utf-8")
        return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
    return "{" + ",".join(f'{_prom_name(k)}="{esc(v)}"' for k, v in sorted(attrs.items())) + "}"


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))
