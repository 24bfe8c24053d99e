"""The process's memory on /metrics: resident bytes, and the caches' bytes against their budget."""

from __future__ import annotations

import random
import string

import httpx
from prometheus_client.parser import text_string_to_metric_families

from ctxwarden.proxy.memory_gauges import resident_bytes
from ctxwarden.proxy.metrics import Metrics
from tests.conftest import policies_off


def gauges(proxy) -> dict[str, float]:
    text = httpx.get(f"{proxy.url}/metrics", timeout=30).text
    return {f.name: f.samples[0].value for f in text_string_to_metric_families(text)
            if f.name.startswith(("ctxwarden_process_", "ctxwarden_cache_"))}


def vm_rss() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))


def test_a_refresher_sets_its_gauges_at_each_snapshot_and_one_that_fails_breaks_nothing():
    metrics, reads = Metrics(), []

    def count(m: Metrics) -> None:
        reads.append(1)
        m.gauge("ctxwarden.reads", len(reads))

    def broken(m: Metrics) -> None:
        raise OSError("no /proc here")

    metrics.refresh_with(broken)
    metrics.refresh_with(count)
    metrics.snapshot()
    [point] = metrics.snapshot()
    assert point == {"name": "ctxwarden.reads", "kind": "gauge", "attributes": {}, "value": 2}


def test_metrics_show_the_resident_memory_and_what_the_caches_hold_within_their_budget(start_proxy, fake):
    proxy = start_proxy({"server": {"cache_mb": 48}, "policies": policies_off("history")})
    before = gauges(proxy)
    # the server runs in this process: its resident set is this process's, as /proc/self/status says it
    assert abs(before["ctxwarden_process_resident_bytes"] - vm_rss()) < 0.2 * vm_rss()
    assert abs(resident_bytes() - vm_rss()) < 0.2 * vm_rss()
    assert before["ctxwarden_cache_budget_bytes"] == 48 * 2**20
    # a long message never seen before: its token counts and history analyses are cached
    rng = random.Random(7)
    words = " ".join("".join(rng.choices(string.ascii_lowercase, k=7)) for _ in range(6000))
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": words}, {"role": "assistant", "content": "ok"},
                                            {"role": "user", "content": "and now?"}]}
    assert httpx.post(f"{proxy.url}/v1/chat/completions", json=body, timeout=60).status_code == 200
    after = gauges(proxy)
    assert after["ctxwarden_cache_bytes"] > before["ctxwarden_cache_bytes"]
    assert after["ctxwarden_cache_bytes"] <= after["ctxwarden_cache_budget_bytes"]


def test_the_dashboards_figures_carry_the_same_memory(start_proxy, monkeypatch):
    monkeypatch.setenv("CTXWARDEN_ADMIN_KEY", "mem-key")
    proxy = start_proxy({"server": {"cache_mb": 40}, "policies": policies_off()})
    memory = httpx.get(f"{proxy.url}/admin/stats", headers={"authorization": "Bearer mem-key"}, timeout=30).json()["memory"]
    assert memory["cache_budget_bytes"] == 40 * 2**20
    assert abs(memory["resident_bytes"] - vm_rss()) < 0.2 * vm_rss()
    assert 0 <= memory["cache_bytes"] <= memory["cache_budget_bytes"]
