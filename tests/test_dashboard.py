"""The dashboard's HTTP side: who may see it, GET /admin/stats after real SDK traffic, and the
per-minute aggregates surviving a restart on the same storage path."""

from __future__ import annotations

import httpx
import pytest

from ctxwarden.proxy.dashboard.collector import Bounded
from ctxwarden.proxy.dashboard.stats import build
from tests.conftest import openai_client, policies_off

ADMIN_KEY = "dash-admin-key"
AUTH = {"authorization": f"Bearer {ADMIN_KEY}"}
OFF = {"policies": policies_off()}


@pytest.fixture(autouse=True)
def admin_key(monkeypatch):
    monkeypatch.setenv("CTXWARDEN_ADMIN_KEY", ADMIN_KEY)


def chat(proxy, n, tenant=None, model="gpt-4o"):
    client = openai_client(proxy, default_headers={"x-ctxwarden-tenant": tenant} if tenant else None)
    for i in range(n):
        client.chat.completions.create(model=model, messages=[{"role": "user", "content": f"secret question {i}"}])


def stats(proxy, **kwargs):
    r = httpx.get(f"{proxy.url}/admin/stats", params=kwargs, headers=AUTH)
    assert r.status_code == 200, r.text
    return r.json()


def test_page_and_stats_refuse_without_the_key(start_proxy, monkeypatch):
    proxy = start_proxy(OFF)
    chat(proxy, 1)
    page = httpx.get(f"{proxy.url}/dashboard")
    assert page.status_code == 401 and '<form method="post" action="/dashboard/login">' in page.text
    assert "requests-total" not in page.text
    for headers in ({}, {"authorization": "Bearer nope"}, {"cookie": "ctxwarden_dashboard=forged"}):
        r = httpx.get(f"{proxy.url}/admin/stats", headers=headers)
        assert r.status_code == 401 and "requests" not in r.json()
        assert httpx.get(f"{proxy.url}/dashboard", headers=headers).status_code == 401
    wrong = httpx.post(f"{proxy.url}/dashboard/login", data={"key": "guess"})
    assert wrong.status_code == 401 and "Wrong admin key" in wrong.text and "set-cookie" not in wrong.headers
    with_header = httpx.get(f"{proxy.url}/dashboard", headers=AUTH)
    assert with_header.status_code == 200 and 'data-testid="requests-total"' in with_header.text
    assert "default-src 'self'" in with_header.headers["content-security-policy"]
    monkeypatch.delenv("CTXWARDEN_ADMIN_KEY")
    assert httpx.get(f"{proxy.url}/dashboard", headers=AUTH).status_code == 403
    assert httpx.get(f"{proxy.url}/admin/stats", headers=AUTH).status_code == 403


def test_login_sets_an_httponly_samesite_strict_cookie_that_opens_stats(start_proxy):
    proxy = start_proxy(OFF)
    r = httpx.post(f"{proxy.url}/dashboard/login", data={"key": ADMIN_KEY})
    assert r.status_code == 303 and r.headers["location"] == "/dashboard"
    cookie = r.headers["set-cookie"]
    attributes = [part.strip().lower() for part in cookie.split(";")]
    assert "httponly" in attributes and "samesite=strict" in attributes and "path=/" in attributes
    assert ADMIN_KEY not in cookie  # an HMAC under the key, not the key
    value = cookie.split(";")[0].split("=", 1)[1]
    jar = {"ctxwarden_dashboard": value}
    assert httpx.get(f"{proxy.url}/dashboard", cookies=jar).status_code == 200
    assert httpx.get(f"{proxy.url}/admin/stats", cookies=jar).status_code == 200
    assert httpx.get(f"{proxy.url}/dashboard/static/dashboard.js").status_code == 200
    assert httpx.get(f"{proxy.url}/dashboard/static/..%2Fdashboard.py").status_code == 404


def test_stats_count_requests_tokens_models_and_tenants(start_proxy):
    proxy = start_proxy(OFF)
    chat(proxy, 3)
    chat(proxy, 2, tenant="acme", model="gpt-4o-mini")
    s = stats(proxy)
    assert s["window"] == "1h" and len(s["buckets"]) == 60 and s["step_s"] == 60
    assert s["requests"]["total"] == 5 and sum(s["requests"]["series"]) == 5
    assert s["requests"]["by_model"] == {"gpt-4o": 3, "gpt-4o-mini": 2}
    assert s["requests"]["by_tenant"] == {"-": 3, "acme": 2}
    assert s["requests"]["by_outcome"] == {"ok": 5}
    assert s["tokens"]["received"] > 0 and s["tokens"]["saved"] == s["tokens"]["received"] - s["tokens"]["forwarded"]
    assert set(s["tokens"]["by_tenant"]) == {"-", "acme"}
    assert s["breaker"] == "closed" and s["quarantine"]["enabled"] is False
    assert [r["tenant"] for r in s["recent"]] == ["acme", "acme", "-", "-", "-"]
    first = s["recent"][0]
    assert first["outcome"] == "ok" and first["latency_ms"] > 0 and first["tokens_before"] > 0
    assert "secret question" not in httpx.get(f"{proxy.url}/admin/stats", headers=AUTH).text  # no content by default
    assert len(stats(proxy, window="1d")["buckets"]) == 96 and stats(proxy, window="1w")["requests"]["total"] == 5
    assert httpx.get(f"{proxy.url}/admin/stats", params={"window": "1y"}, headers=AUTH).status_code == 400


def test_show_content_puts_the_last_user_message_in_the_log(start_proxy):
    proxy = start_proxy({**OFF, "dashboard": {"show_content": True}})
    chat(proxy, 1)
    assert stats(proxy)["recent"][0]["content"] == "secret question 0"


def test_aggregates_survive_a_restart_on_the_same_storage_path(start_proxy, tmp_path):
    first = start_proxy(OFF)
    chat(first, 4, tenant="acme")
    first.stop()  # a clean shutdown flushes what the background writer had not written yet
    assert (tmp_path / "store" / "dashboard.sqlite3").exists()
    second = start_proxy(OFF)
    s = stats(second)
    assert s["requests"]["total"] == 4 and s["requests"]["by_tenant"] == {"acme": 4}
    assert s["recent"] == []  # the request log is in memory only
    chat(second, 1)
    assert stats(second)["requests"]["total"] == 5


def test_label_values_are_bounded():
    bounded = Bounded(limit=3)
    assert [bounded(f"m{i}") for i in range(5)] == ["m0", "m1", "m2", "other", "other"]
    assert bounded("m1") == "m1" and bounded(None) == "-" and len(Bounded()("x" * 500)) == 64
    assert Bounded()("bad\nname") == "bad?name"


def test_poisoning_alert_follows_the_alert_rate():
    now = 1_700_000_000.0
    minute = int(now // 60)
    rows = [(minute, "poisoning_checked", "", 10.0), (minute, "poisoning_blocked", "", 2.0)]
    assert build(rows, "1h", alert_rate=0.1, min_samples=5, now=now)["poisoning"]["alert"] is True
    assert build(rows, "1h", alert_rate=0.25, min_samples=5, now=now)["poisoning"]["alert"] is False
    assert build(rows, "1h", alert_rate=0.1, min_samples=20, now=now)["poisoning"]["alert"] is False
    assert build(rows, "1h", alert_rate=None, now=now)["poisoning"]["blocked_rate"] == 0.2
