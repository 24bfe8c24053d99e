"""/metrics under `serve --workers N`: every worker's figures, summed, whichever worker answers."""

from __future__ import annotations

from ctxwarden.proxy.metrics import Metrics, render
from ctxwarden.proxy.metrics_share import SharedMetrics


def test_a_scrape_adds_the_other_workers_counters_and_histograms_and_labels_gauges(tmp_path):
    one, two = Metrics(), Metrics()
    share_one, share_two = SharedMetrics(one, tmp_path, pid=101), SharedMetrics(two, tmp_path, pid=202)
    one.add("ctxwarden.requests", 2, model="gpt-4o")
    two.add("ctxwarden.requests", 3, model="gpt-4o")
    two.add("ctxwarden.requests", 1, model="other")
    one.record("ctxwarden.policy.duration_ms", 2.0, policy="loops")
    two.record("ctxwarden.policy.duration_ms", 4.0, policy="loops")
    one.gauge("ctxwarden.state.backend_up", 1)
    two.gauge("ctxwarden.state.backend_up", 0)
    share_two.write()
    text = render(one.registry()).decode()
    assert 'ctxwarden_requests_total{model="gpt-4o"} 5.0' in text and 'ctxwarden_requests_total{model="other"} 1.0' in text
    assert 'ctxwarden_policy_duration_seconds_count{policy="loops"} 2.0' in text
    assert 'ctxwarden_policy_duration_seconds_sum{policy="loops"} 0.006' in text
    assert 'ctxwarden_state_backend_up{worker="202"} 0.0' in text
    one.add("ctxwarden.requests", 1, model="gpt-4o")  # this worker's own figures are live, not its last snapshot
    share_one.write()
    assert 'ctxwarden_requests_total{model="gpt-4o"} 6.0' in render(one.registry()).decode()
    assert 'ctxwarden_requests_total{model="gpt-4o"} 6.0' in render(two.registry()).decode()


def test_a_half_written_snapshot_is_skipped_not_fatal(tmp_path):
    metrics = Metrics()
    SharedMetrics(metrics, tmp_path, pid=1)
    (tmp_path / "2.json").write_text('[{"name": "x", "kind": "coun')
    metrics.add("ctxwarden.requests", 1)
    assert "ctxwarden_requests_total 1.0" in render(metrics.registry()).decode()
