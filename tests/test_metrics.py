"""The metrics facade: in-process aggregation, Prometheus exposition by prometheus_client."""

from __future__ import annotations

import threading

import httpx
from prometheus_client.parser import text_string_to_metric_families

from ctxwarden.proxy.metrics import LATENCY_SECONDS, SECONDS, SHARE, Metrics, base_unit, buckets_for
from ctxwarden.proxy.telemetry import Telemetry


def families(text: str) -> dict[str, object]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def test_exposition_has_help_and_type_and_parses_as_prometheus_text():
    t = Telemetry()
    t.metrics.add("ctxwarden.requests", 1, model="gpt-4o", status=200)
    t.metrics.add("ctxwarden.requests", 2, model="gpt-4o", status=200)
    t.metrics.record("ctxwarden.request.duration_ms", 3.2, model="gpt-4o")
    t.metrics.gauge("ctxwarden.quarantine.pending", 4)
    text = t.prometheus_text()
    assert "# HELP ctxwarden_requests_total" in text and "# TYPE ctxwarden_request_duration_seconds histogram" in text
    assert "_ms" not in text  # durations in seconds, the base unit
    parsed = families(text)
    requests = parsed["ctxwarden_requests"]
    assert requests.type == "counter"
    assert [(s.labels, s.value) for s in requests.samples if s.name.endswith("_total")] == [
        ({"model": "gpt-4o", "status": "200"}, 3.0)]
    samples = parsed["ctxwarden_request_duration_seconds"].samples
    duration = {s.labels["le"]: s.value for s in samples if s.name.endswith("_bucket")}
    assert duration["0.0025"] == 0 and duration["0.005"] == 1 and duration["+Inf"] == 1  # 3.2 ms = 0.0032 s
    assert next(s.value for s in samples if s.name.endswith("_sum")) == 0.0032
    assert parsed["ctxwarden_quarantine_pending"].samples[0].value == 4


def test_milliseconds_are_recorded_as_seconds_under_the_base_unit_name():
    assert base_unit("ctxwarden.policy.duration_ms") == ("ctxwarden.policy.duration_seconds", 0.001)
    assert base_unit("ctxwarden.poisoning.checker_ms") == ("ctxwarden.poisoning.checker_seconds", 0.001)
    assert base_unit("ctxwarden.tools.saved_tokens") == ("ctxwarden.tools.saved_tokens", 1.0)
    t = Telemetry()
    for ms in (0.2, 40.0, 2500.0):
        t.metrics.record("ctxwarden.compression.duration_ms", ms, policy="history")
    [point] = t.snapshot()
    assert point["name"] == "ctxwarden.compression.duration_seconds" and point["sum"] == (0.2 + 40.0 + 2500.0) / 1000
    assert point["bounds"] == list(LATENCY_SECONDS)
    slots = [i for i, n in enumerate(point["buckets"]) for _ in range(n)]
    assert [point["bounds"][i] for i in slots] == [0.0005, 0.05, 2.5]  # each in the bucket of its seconds
    assert t.value("ctxwarden.compression.duration_ms") == 3 == t.value("ctxwarden.compression.duration_seconds")


def test_buckets_fit_what_a_histogram_measures():
    assert buckets_for("ctxwarden.policy.duration_seconds") == LATENCY_SECONDS
    assert buckets_for("gen_ai.client.operation.duration") == SECONDS
    assert buckets_for("ctxwarden.validation.quality") == SHARE
    assert buckets_for("ctxwarden.budget.usage") == SHARE
    assert max(buckets_for("ctxwarden.request.received_tokens")) >= 100_000  # token counts, not milliseconds
    m = Metrics()
    for value in (0.12, 0.55, 0.97):
        m.record("ctxwarden.validation.quality", value)
    point = m.snapshot()[0]
    assert point["count"] == 3 and sum(point["buckets"]) == 3 and point["buckets"][-1] == 0  # nothing past 1.0


def test_no_increment_is_lost_between_threads():
    m = Metrics()

    def hammer():
        for _ in range(20_000):
            m.add("hits", 1, policy="x")
            m.record("lat_seconds", 1.0, policy="x")

    threads = [threading.Thread(target=hammer) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    points = {p["name"]: p for p in m.snapshot()}
    assert points["hits"]["value"] == 80_000 and points["lat_seconds"]["count"] == 80_000


def test_the_real_server_serves_parseable_metrics(start_proxy):
    proxy = start_proxy()
    httpx.post(f"{proxy.url}/v1/chat/completions", json={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]})
    response = httpx.get(f"{proxy.url}/metrics")
    parsed = families(response.text)
    assert response.status_code == 200
    assert any(s.value >= 1 for s in parsed["ctxwarden_requests"].samples if s.name == "ctxwarden_requests_total")
    durations = parsed["ctxwarden_policy_duration_seconds"]
    assert durations.type == "histogram" and "ctxwarden_policy_duration_ms" not in parsed
    assert {s.labels["policy"] for s in durations.samples} >= {"loops", "poisoning", "clash"}
    assert all(s.value < 30 for s in durations.samples if s.name.endswith("_sum"))  # seconds, not milliseconds
    assert "ctxwarden_request_duration_seconds" in parsed


def test_model_labels_are_bounded_to_known_models(start_proxy):
    proxy = start_proxy({"models": {"my-llama": {"context_window": 8192}}})
    with httpx.Client(timeout=30) as client:
        for model in ["gpt-4o", "my-llama", *[f"made-up-{i}" for i in range(40)]]:
            client.post(f"{proxy.url}/v1/chat/completions", json={"model": model, "messages": [{"role": "user", "content": "hi"}]})
    parsed = families(httpx.get(f"{proxy.url}/metrics").text)
    models = {s.labels["model"] for s in parsed["ctxwarden_requests"].samples}
    assert models == {"gpt-4o", "my-llama", "other"}  # configured or in litellm's map; the rest folded


def test_label_sets_are_remembered_without_mixing_series_or_growing_without_bound():
    from ctxwarden.proxy.metrics import MAX_REMEMBERED_KEYS, Metrics

    m = Metrics()
    m.bound_labels(model=lambda v: v if v in ("gpt-4o",) else "other")
    for _ in range(3):
        m.record("ctxwarden.policy.duration_ms", 2.0, policy="clash", hook="on_request")
        m.record("ctxwarden.policy.duration_ms", 4.0, hook="on_request", policy="loops")
        m.add("ctxwarden.requests", 1, model="gpt-4o")
        m.add("ctxwarden.requests", 1, model="my-own-llama")  # bounded to "other", even when remembered
        m.add("ctxwarden.odd", 1, detail={"unhashable": True})  # computed each time, not remembered
    counters = {k: v for k, v in m._counters.items()}
    assert counters[("ctxwarden.requests", (("model", "gpt-4o"),))] == 3
    assert counters[("ctxwarden.requests", (("model", "other"),))] == 3
    assert counters[("ctxwarden.odd", (("detail", "{'unhashable': True}"),))] == 3
    rows = {labels: row for (name, labels), row in m._histograms.items()}
    assert rows[(("hook", "on_request"), ("policy", "clash"))][-1] == 3
    assert rows[(("hook", "on_request"), ("policy", "loops"))][-1] == 3
    for i in range(MAX_REMEMBERED_KEYS + 10):  # a client sending a new model name every time
        m.add("ctxwarden.requests", 1, model=f"m{i}")
    assert len(m._keys) <= MAX_REMEMBERED_KEYS
