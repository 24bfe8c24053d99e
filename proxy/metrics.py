"""Counters, histograms and gauges, aggregated in process and rendered by prometheus_client.

A measurement on the request path is a dict lookup and an addition under a lock (about 1 µs);
the OpenTelemetry SDK's instruments cost about 5 µs each, and a request with the default policies
makes fifteen or more. When metrics are exported over OTLP, each measurement is also handed to an
OTel instrument (`mirror`), so both receivers see the same figures.

Durations are exported in seconds, the base unit: a name recorded with the suffix `_ms` (policies
measure `time.perf_counter()` differences in milliseconds) is kept, shown and mirrored as the same
name ending in `_seconds`, its value divided by 1000 (`ctxwarden.policy.duration_ms` 3.2 →
`ctxwarden_policy_duration_seconds` 0.0032). A duration recorded in seconds under its OpenTelemetry
name (`gen_ai.client.operation.duration`) is shown with the unit suffix Prometheus asks for
(`gen_ai_client_operation_duration_seconds`).
"""

from __future__ import annotations

import bisect
import logging
import os
import re
import threading
from typing import Any, Callable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from .metrics_share import merge

log = logging.getLogger("ctxwarden.metrics")

Labels = tuple[tuple[str, Any], ...]
Mirror = Callable[[str, str, float, dict[str, Any]], None]

# Bucket bounds by what a histogram measures (named by its unit or its subject).
# OpenTelemetry GenAI conventions' advice for gen_ai.client.operation.duration (seconds).
SECONDS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
# The proxy's own latencies (a policy step takes 50 µs to seconds; a request up to a minute).
LATENCY_SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
SHARE = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0)
# How full a context window is: a share that may pass 1 (a request over its window).
FILL = (*SHARE, 1.1, 1.25, 1.5, 2.0, 4.0)
# before / after factors (compression): 1 (nothing gained) to a thousandfold.
RATIO = (1, 1.1, 1.25, 1.5, 2, 3, 5, 10, 20, 50, 100, 1000)
# OpenTelemetry GenAI conventions' advice for gen_ai.client.token.usage (tokens).
GEN_AI_TOKENS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)
MAX_REMEMBERED_KEYS = 4096  # label sets remembered by Metrics._key
SIZE = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000, 200000, 500000)
_SHARE_NAMES = re.compile(r"quality|accuracy|relevance|confidence|score|share")


def base_unit(name: str) -> tuple[str, float]:
    """(the name a measurement is kept under, the factor its value is multiplied by): `…_ms` →
    (`…_seconds`, 0.001); any other name is kept as it is."""
    if name.endswith("_ms"):
        return name[:-3] + "_seconds", 0.001
    return name, 1.0


def buckets_for(name: str) -> tuple[float, ...]:
    """Bucket bounds for a histogram, by its (base-unit) name."""
    if name.startswith("gen_ai.") and name.endswith(".duration"):
        return SECONDS
    if name == "gen_ai.client.token.usage":
        return GEN_AI_TOKENS
    if name.endswith(("_seconds", ".seconds", ".duration", "_duration")):
        return LATENCY_SECONDS
    if name.endswith("ratio"):
        return RATIO
    if name.endswith("usage"):
        return FILL
    if _SHARE_NAMES.search(name):
        return SHARE
    return SIZE


class Metrics:
    """The facade every policy and the proxy measure through (`Services.metrics`)."""

    def __init__(self, mirror: Mirror | None = None) -> None:
        self._bounded: dict[str, Callable[[Any], str]] = {}
        self._lock = threading.Lock()
        self._counters: dict[tuple[str, Labels], float] = {}
        self._gauges: dict[tuple[str, Labels], float] = {}
        self._histograms: dict[tuple[str, Labels], list] = {}  # [bucket counts…, sum, count]
        self._bounds: dict[str, tuple[float, ...]] = {}
        self._units: dict[str, tuple[str, float]] = {}  # recorded name → (kept name, factor); see base_unit
        self._mirror = mirror
        self._keys: dict[tuple, tuple[str, Labels]] = {}
        # Other worker processes' snapshots, under `serve --workers N` (metrics_share.py): [(pid, points)].
        self.peers: Callable[[], list[tuple[str, list[dict[str, Any]]]]] | None = None
        # Gauges of a state nothing records as it changes (the process's memory), set when read.
        self._refreshers: list[Callable[[Metrics], None]] = []

    def refresh_with(self, refresher: Callable[["Metrics"], None]) -> None:
        """Call `refresher(self)` before every snapshot (each scrape of /metrics, each worker's share):
        for gauges read from the process rather than recorded on the request path. One that raises is
        logged and skipped, never a failed scrape."""
        self._refreshers.append(refresher)

    def bound_labels(self, **rules: Callable[[Any], str]) -> None:
        """Map the values of these labels through a rule (e.g. unknown model names → "other") so no
        client can grow the number of series without bound."""
        self._bounded.update(rules)

    def _key(self, name: str, attributes: dict[str, Any]) -> tuple[str, Labels]:
        """(name, sorted labels), remembered per call's exact arguments: a request records a dozen
        points with the same few label sets, and sorting them each time cost more than the rest."""
        try:
            probe: tuple | None = (name, *attributes.items())
            key = self._keys.get(probe)
        except TypeError:  # an unhashable label value: computed each time
            probe, key = None, None
        if key is None:
            key = (name, self._labels(dict(attributes)))
            if probe is not None:
                if len(self._keys) >= MAX_REMEMBERED_KEYS:
                    self._keys.clear()  # raw values (model names) may vary without bound
                self._keys[probe] = key
        return key

    def _labels(self, attributes: dict[str, Any]) -> Labels:
        if self._bounded:
            for label, rule in self._bounded.items():
                if attributes.get(label) is not None:
                    attributes[label] = rule(attributes[label])
        return _labels(attributes)

    def add(self, name: str, value: float = 1, **attributes: Any) -> None:
        key = self._key(name, attributes)
        with self._lock:
            self._counters[key] = self._counters.get(key, 0.0) + value
        if self._mirror:
            self._mirror("counter", name, value, dict(key[1]))

    def record(self, name: str, value: float, **attributes: Any) -> None:
        """A histogram measurement; `…_ms` names are kept in seconds (see the module's docstring)."""
        unit = self._units.get(name)
        if unit is None:
            unit = self._units.setdefault(name, base_unit(name))
        name, factor = unit
        if factor != 1.0:
            value = value * factor
        key = self._key(name, attributes)
        bounds = self._bounds.get(name) or self._bounds.setdefault(name, buckets_for(name))
        slot = bisect.bisect_left(bounds, value)
        with self._lock:
            row = self._histograms.get(key)
            if row is None:
                row = self._histograms[key] = [0] * (len(bounds) + 1) + [0.0, 0]
            row[slot] += 1
            row[-2] += value
            row[-1] += 1
        if self._mirror:
            self._mirror("histogram", name, value, dict(key[1]))

    def gauge(self, name: str, value: float, **attributes: Any) -> None:
        key = self._key(name, attributes)
        with self._lock:
            self._gauges[key] = value
        if self._mirror:
            self._mirror("gauge", name, value, dict(key[1]))

    def snapshot(self) -> list[dict[str, Any]]:
        """Every metric point now: [{name, kind, attributes, value | count/sum/bounds/buckets}]."""
        for refresher in self._refreshers:
            try:
                refresher(self)
            except Exception:  # a gauge that cannot be read stays at its last value
                log.exception("metrics: a gauge could not be refreshed")
        with self._lock:
            counters, gauges = list(self._counters.items()), list(self._gauges.items())
            histograms = [(key, list(row)) for key, row in self._histograms.items()]
        points: list[dict[str, Any]] = []
        points += [{"name": n, "kind": "counter", "attributes": dict(labels), "value": v} for (n, labels), v in counters]
        points += [{"name": n, "kind": "gauge", "attributes": dict(labels), "value": v} for (n, labels), v in gauges]
        for (n, labels), row in histograms:
            points.append({"name": n, "kind": "histogram", "attributes": dict(labels), "count": row[-1], "sum": row[-2],
                           "bounds": list(self._bounds[n]), "buckets": row[:-2]})
        return points

    def registry(self) -> CollectorRegistry:
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Collector(self))
        return registry


class _Collector:
    """What /metrics shows: one family per metric name, with HELP and TYPE, by the exposition format."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        families: dict[tuple[str, str], Any] = {}
        points = self.metrics.snapshot()
        if self.metrics.peers is not None:
            points = merge(points, str(os.getpid()), self.metrics.peers())
        for p in points:
            name = exposition_name(p["name"], p["kind"])
            labels = {prom_name(k): _label_value(v) for k, v in sorted(p["attributes"].items())}
            family = families.get((name, p["kind"]))
            if family is None:
                family = families[(name, p["kind"])] = _family(p["kind"], name, p["name"], list(labels))
            if p["kind"] == "histogram":
                cumulative, buckets = 0, []
                for bound, count in zip([*p["bounds"], float("inf")], p["buckets"]):
                    cumulative += count
                    buckets.append(("+Inf" if bound == float("inf") else _bound(bound), cumulative))
                _add_histogram(family, name, labels, buckets, p["sum"], p["count"])
            else:
                family.add_sample(f"{name}_total" if p["kind"] == "counter" and not name.endswith("_total") else name,
                                  labels, p["value"])
        yield from families.values()


# HELP text of the main series; any other is described by its kind and the name it was recorded under.
HELP = {
    "ctxwarden.requests": "Requests received, by API (chat, responses, messages), model, HTTP status and stream.",
    "ctxwarden.request.duration_seconds": "Time from receiving a chat request to its response head, in seconds.",
    "ctxwarden.request.received_tokens": "Prompt tokens of a chat request as the client sent it.",
    "ctxwarden.request.forwarded_tokens": "Prompt tokens of a chat request as forwarded upstream, after the policies.",
    "ctxwarden.policy.duration_seconds": "Time one policy hook took, in seconds.",
    "ctxwarden.policy.actions": "Actions the policies took, by policy and action.",
    "ctxwarden.policy.failures": "Policy hooks that raised; the request went on without that policy's change.",
    "ctxwarden.poisoning.checked": "Answers or inputs the poisoning policy checked, by source.",
    "ctxwarden.poisoning.blocked": "Answers or inputs the poisoning policy blocked.",
    "ctxwarden.poisoning.quarantined": "Answers or inputs held in quarantine for a human to review.",
    "gen_ai.client.operation.duration": "GenAI operation duration (upstream call, to its last chunk), in seconds.",
    "gen_ai.client.token.usage": "Input and output tokens of each upstream call, as the upstream reported them.",
}


def _family(kind: str, name: str, original: str, label_names: list[str]) -> Any:
    documentation = HELP.get(original) or f"ctxwarden {kind}: {original}"
    if kind == "counter":
        return CounterMetricFamily(name.removesuffix("_total"), documentation)
    if kind == "gauge":
        return GaugeMetricFamily(name, documentation)
    return HistogramMetricFamily(name, documentation)


def _add_histogram(family: Any, name: str, labels: dict[str, str], buckets: list, total: float, count: int) -> None:
    for le, value in buckets:
        family.add_sample(f"{name}_bucket", {**labels, "le": le}, value)
    family.add_sample(f"{name}_count", labels, count)
    family.add_sample(f"{name}_sum", labels, total)


def render(registry: CollectorRegistry) -> bytes:
    return generate_latest(registry)


def prom_name(name: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_:]", "_", name)


def exposition_name(name: str, kind: str) -> str:
    """A metric's Prometheus name. A time histogram named by OpenTelemetry without its unit
    (`gen_ai.client.operation.duration`, unit s) gets the unit suffix Prometheus names carry:
    `gen_ai_client_operation_duration_seconds`. OTLP keeps the OpenTelemetry name."""
    out = prom_name(name)
    if kind == "histogram" and name.endswith((".duration", "_duration")):
        out += "_seconds"
    return out


def _labels(attributes: dict[str, Any]) -> Labels:
    return tuple(sorted((k, v if isinstance(v, (str, bool, int, float)) else str(v))
                        for k, v in attributes.items() if v is not None))


def _label_value(value: Any) -> str:
    text = str(value)
    if not text.isascii():  # a lone surrogate must not make the whole page unencodable
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _bound(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))
