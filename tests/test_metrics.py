"""The metrics facade: in-process aggregation, Prometheus exposition by prometheus_client."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from ctxwarden.proxy.metrics import GEN_AI_TOKENS, LATENCY_SECONDS, SECONDS, SHARE, Metrics, base_unit, buckets_for
from ctxwarden.proxy.telemetry import Telemetry
from tests.conftest import policies_off


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
    assert buckets_for("ctxwarden.tools.relevance") == SHARE
    assert max(buckets_for("ctxwarden.request.received_tokens")) >= 100_000  # token counts, not milliseconds
    assert buckets_for("gen_ai.client.token.usage") == GEN_AI_TOKENS  # the GenAI conventions' advice, not 0–1
    for name, value in (("gen_ai.client.token.usage", 3000), ("ctxwarden.compression.ratio", 7.5),
                        ("ctxwarden.budget.usage", 1.3), ("ctxwarden.budget.usage", 0.42), ("ctxwarden.tools.k", 12)):
        bounds = buckets_for(name)
        assert bounds == tuple(sorted(bounds)) and value <= bounds[-1], (name, value)  # lands in a bucket, not +Inf
        assert sum(1 for b in bounds if b < value) >= 2 and sum(1 for b in bounds if b >= value) >= 2, (name, value)
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


HOSTILE_MODELS = ['gpt-4o"} 1\nfake_metric 666', "x" * 5000, "mod\\el\"{le=\"}", "модель-🚀", "tab\there",
                  "# HELP injected", "gpt-4o\n"]


def test_hostile_model_names_never_break_the_endpoint(start_proxy, monkeypatch):
    monkeypatch.setenv("CTXWARDEN_ADMIN_KEY", "metrics-admin")
    proxy = start_proxy({"models": {"my-llama": {"context_window": 8192}}})
    bodies = [b'{"model": "\\ud800", "messages": [{"role": "user", "content": "hi"}]}']  # a lone surrogate
    bodies += [json.dumps({"model": m, "messages": [{"role": "user", "content": "hi"}]}).encode() for m in HOSTILE_MODELS]
    with httpx.Client(timeout=30) as client:
        for body in bodies:
            client.post(f"{proxy.url}/v1/chat/completions", content=body, headers={"content-type": "application/json"})
        client.post(f"{proxy.url}/v1/chat/completions", json={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}],
                                                              "stream": True})
        response = client.get(f"{proxy.url}/metrics")
        stats = client.get(f"{proxy.url}/admin/stats", headers={"authorization": "Bearer metrics-admin"})
    assert response.status_code == 200 and "fake_metric" not in families(response.text)
    parsed = families(response.text)
    for family in parsed.values():
        for sample in family.samples:
            for label in ("model", "gen_ai_request_model", "gen_ai_response_model"):
                assert sample.labels.get(label, "gpt-4o") in {"gpt-4o", "other"}, (sample.name, sample.labels)
    requests = sum(s.value for s in parsed["ctxwarden_requests"].samples if s.name == "ctxwarden_requests_total")
    assert requests == len(bodies) + 1
    # The page counts every request received, as /metrics does: the lone surrogate's 400 too.
    assert stats.status_code == 200 and stats.json()["requests"]["total"] == len(bodies) + 1
    assert stats.json()["requests"]["by_model"] == {"other": len(HOSTILE_MODELS), "gpt-4o": 1, "-": 1}  # "-": unreadable
    assert {r["model"] for r in stats.json()["recent"]} >= {"gpt-4o?", "tab?here"}  # the log names them, printable


def test_every_family_on_the_real_server_has_help_and_type_and_genai_metrics(start_proxy):
    proxy = start_proxy()
    with httpx.Client(timeout=30) as client:
        client.post(f"{proxy.url}/v1/chat/completions", json={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]})
        with client.stream("POST", f"{proxy.url}/v1/chat/completions",
                           json={"model": "gpt-4o", "stream": True, "messages": [{"role": "user", "content": "hi"}]}) as r:
            assert r.status_code == 200 and "[DONE]" in "".join(r.iter_text())
        text = client.get(f"{proxy.url}/metrics").text
    helps = {line.split()[2].removesuffix("_total") for line in text.splitlines() if line.startswith("# HELP ")}
    types = {line.split()[2].removesuffix("_total") for line in text.splitlines() if line.startswith("# TYPE ")}
    parsed = families(text)
    assert len(parsed) > 5 and helps == types == set(parsed)  # HELP and TYPE on every family, nothing else
    assert parsed["ctxwarden_requests"].documentation.startswith("Requests received, by API")
    assert "tokens" in parsed["gen_ai_client_token_usage"].documentation
    usage = parsed["gen_ai_client_token_usage"]
    assert usage.type == "histogram"
    counts = {s.labels["gen_ai_token_type"]: s.value for s in usage.samples if s.name.endswith("_count")}
    assert counts == {"input": 2, "output": 2}  # the plain and the streamed request alike
    duration = parsed["gen_ai_client_operation_duration_seconds"]  # a time histogram carries its unit
    assert duration.type == "histogram" and next(s.labels["le"] for s in duration.samples if s.name.endswith("_bucket")) == "0.01"
    for family in parsed.values():  # base units: no milliseconds anywhere
        assert not family.name.endswith(("_ms", "_milliseconds")), family.name


@pytest.mark.skipif(shutil.which("promtool") is None, reason="no promtool (Debian: apt-get install -y prometheus)")
def test_promtool_accepts_the_real_servers_metrics(start_proxy):
    proxy = start_proxy({"policies": {"poisoning": {"enabled": True}}})
    with httpx.Client(timeout=30) as client:
        for model, stream in (("gpt-4o", False), ("gpt-4o", True), ('evil"\n{model}', False)):
            client.post(f"{proxy.url}/v1/chat/completions",
                        json={"model": model, "stream": stream, "messages": [{"role": "user", "content": "hi"}]})
        text = client.get(f"{proxy.url}/metrics").text
    assert "gen_ai_client_token_usage_bucket" in text and "ctxwarden_policy_duration_seconds_bucket" in text
    run = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    # promtool exits 1 on lint problems and 3 on a parse error; it prints either on stderr/stdout
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.parametrize("api", ["responses", "messages"])
def test_token_usage_is_recorded_on_the_typed_apis_plain_and_streamed(fake, start_proxy, api):
    """The upstream's usage (input/output tokens, nested details and all) reaches gen_ai.client.token.usage
    whether the answer is relayed as its bytes or streamed."""
    config = {"policies": policies_off()}
    if api == "messages":
        config["upstream"] = {"anthropic": {"base_url": f"{fake.url}/v1", "api_key_env": None}}
    proxy = start_proxy(config)
    path = {"responses": "/v1/responses", "messages": "/v1/messages"}[api]
    body = ({"model": "gpt-4o", "input": "hi there"} if api == "responses"
            else {"model": "claude-x", "max_tokens": 20, "messages": [{"role": "user", "content": "hi there"}]})
    with httpx.Client(timeout=30) as client:
        assert client.post(f"{proxy.url}{path}", json=body).status_code == 200
        with client.stream("POST", f"{proxy.url}{path}", json={**body, "stream": True}) as r:
            r.read()
        text = client.get(f"{proxy.url}/metrics").text
    usage = families(text)["gen_ai_client_token_usage"]
    sums = {s.labels["gen_ai_token_type"]: s.value for s in usage.samples if s.name.endswith("_sum")}
    counts = {s.labels["gen_ai_token_type"]: s.value for s in usage.samples if s.name.endswith("_count")}
    assert counts == {"input": 2, "output": 2} and sums["input"] == 20  # the fake reports 10 input tokens each
