"""The dashboard's HTTP side: who may see it, GET /admin/stats after real SDK traffic, and the
per-minute aggregates surviving a restart on the same storage path."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest

from ctxwarden.proxy.dashboard import live
from ctxwarden.proxy.dashboard.collector import Bounded
from ctxwarden.proxy.dashboard.prices import input_price
from ctxwarden.proxy.dashboard.stats import build
from tests.conftest import openai_client, policies_off
from tests.test_compression_e2e import agent_conversation, window_for

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
    assert s["cost_saved_usd"] == 0  # priced models, nothing saved (no budget pressure)
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


def test_two_proxies_sharing_a_storage_path_each_show_both_counts(start_proxy, tmp_path):
    a, b = start_proxy(OFF), start_proxy(OFF)  # the same tmp_path/store: replicas on one host
    chat(a, 2, tenant="acme")
    chat(b, 3, tenant="globex")
    deadline = time.monotonic() + 10  # each flushes its own counts every 2 s; its own unflushed ones show at once
    while {stats(a)["requests"]["total"], stats(b)["requests"]["total"]} != {5} and time.monotonic() < deadline:
        time.sleep(0.2)
    for proxy in (a, b):
        assert stats(proxy)["requests"]["by_tenant"] == {"globex": 3, "acme": 2}
    assert (tmp_path / "store" / "dashboard.sqlite3").exists()


def test_the_minute_store_adds_up_buckets_and_drops_rows_past_retention(tmp_path):
    from ctxwarden.proxy.dashboard.store import MinuteStore

    now_minute = int(time.time() // 60)
    old, recent = now_minute - 3 * 24 * 60, now_minute - 5
    store = MinuteStore(tmp_path / "d.sqlite3", retention_days=1)
    store._pruned_at = time.time()  # no pruning on this first write
    store.add({(old, "requests", ""): 2, (recent, "requests", ""): 1, (recent + 1, "requests", ""): 4})
    store.add({(recent, "requests", ""): 1})  # added to the same row
    assert sorted(store.rows(old, 1)) == [(old, "requests", "", 2.0), (recent, "requests", "", 2.0),
                                          (recent + 1, "requests", "", 4.0)]
    assert store.rows(recent, 15) == [(recent, "requests", "", 6.0)]  # both minutes in one 15-minute bucket
    store._pruned_at = 0.0  # the hourly prune is due
    store.add({(now_minute, "requests", ""): 1})
    assert sorted(m for m, *_ in store.rows(old, 1)) == [recent, recent + 1, now_minute]  # the 3-day-old row is gone
    store.close()
    reopened = MinuteStore(tmp_path / "d.sqlite3", retention_days=1)
    assert sum(v for *_, v in reopened.rows(old, 1)) == 7.0  # on disk, not in memory
    reopened.close()


def test_label_values_are_bounded():
    bounded = Bounded(limit=3)
    assert [bounded(f"m{i}") for i in range(5)] == ["m0", "m1", "m2", "other", "other"]
    assert bounded("m1") == "m1" and bounded(None) == "-" and len(Bounded()("x" * 500)) == 64
    assert Bounded()("bad\nname") == "bad?name"


def test_clashes_loops_and_poisoning_are_counted_by_type_resolution_and_kind():
    from ctxwarden.policies.base import Exchange
    from ctxwarden.proxy.dashboard.collector import request_counts

    ex = Exchange(request_id="r1", model="gpt-4o", messages=[], tools=None, body={})
    ex.record("clash", "correction", type="preference", label="hotel")
    ex.record("clash", "unresolved", type="fact", label="city")
    ex.record("clash", "duplicate", count=1)  # not a decision: not a clash of its own
    ex.record("loops", "stop", kind="repeat")
    ex.record("poisoning", "quarantined")
    counts = request_counts(ex, "responded", "gpt-4o", "-")
    assert counts[("clash", "preference/correction")] == 1 and counts[("clash", "fact/unresolved")] == 1
    assert not [k for k in counts if k[0] == "clash" and "duplicate" in k[1]]
    assert counts[("loops_stopped", "repeat")] == 1
    assert counts[("poisoning_quarantined", "")] == 1 and counts[("poisoning_checked", "")] == 1
    assert ("poisoning_blocked", "") not in counts and counts[("requests", "outcome:responded")] == 1
    now = 1_700_000_000.0
    s = build([(int(now // 60), metric, label, value) for (metric, label), value in counts.items()], "1h",
              alert_rate=None, now=now)
    assert s["clashes"]["by_type"] == {"preference": 1, "fact": 1} and s["clashes"]["total"] == 2
    assert s["clashes"]["by_resolution"] == {"correction": 1, "unresolved": 1}
    assert s["loops"] == {"stopped": 1, "by_kind": {"repeat": 1}}
    assert s["actions"]["by_policy"] == {"clash": 3, "loops": 1, "poisoning": 1}


async def test_a_clash_the_strategy_resolves_counts_once_by_type_and_resolution():
    from ctxwarden.proxy.dashboard.collector import request_counts
    from tests.test_clash_resolve import conversation, exchange, make_policy

    policy, _ = make_policy()
    messages = conversation("We're 2 adults. I'm in Oslo.", "I'm in Bergen now.")
    first = exchange(messages)
    await policy.on_request(first)
    again = exchange(messages + [{"role": "assistant", "content": "Noted."}, {"role": "user", "content": "Thanks."}])
    await policy.on_request(again)  # the same clash, already decided: resolved again, not counted again
    counts = [request_counts(ex, "responded", "gpt-4o", "-") for ex in (first, again)]
    clashes = [{k[1]: v for k, v in c.items() if k[0] == "clash"} for c in counts]
    assert len(clashes[0]) == 1 and next(iter(clashes[0])).endswith("/decided") and clashes[1] == {}
    assert "clash.resolve" in [a.label for a in again.actions]


def test_poisoning_alert_follows_the_alert_rate():
    now = 1_700_000_000.0
    minute = int(now // 60)
    rows = [(minute, "poisoning_checked", "", 10.0), (minute, "poisoning_blocked", "", 2.0)]
    assert build(rows, "1h", alert_rate=0.1, min_samples=5, now=now)["poisoning"]["alert"] is True
    assert build(rows, "1h", alert_rate=0.25, min_samples=5, now=now)["poisoning"]["alert"] is False
    assert build(rows, "1h", alert_rate=0.1, min_samples=20, now=now)["poisoning"]["alert"] is False
    assert build(rows, "1h", alert_rate=None, now=now)["poisoning"]["blocked_rate"] == 0.2


def compressed_traffic(proxy) -> None:
    """One gpt-4o request over its (small) window: the history policy saves tokens; then one
    request for a configured model litellm has no price for."""
    client = openai_client(proxy)
    client.chat.completions.create(model="gpt-4o", messages=agent_conversation(60))
    client.chat.completions.create(model="my-llama", messages=[{"role": "user", "content": "hi"}])


def pressure_config() -> dict:
    window = window_for(agent_conversation(60), 0.87)
    return {"models": {"gpt-4o": {"context_window": window}, "my-llama": {"context_window": 8192}},
            "policies": policies_off("history", "archive")}


def test_cost_saved_is_tokens_saved_times_the_models_input_price(start_proxy):
    proxy = start_proxy(pressure_config())
    compressed_traffic(proxy)
    s = stats(proxy)
    gpt4o, llama = s["tokens"]["by_model"]["gpt-4o"], s["tokens"]["by_model"]["my-llama"]
    assert gpt4o["saved"] > 100 and llama["saved"] == 0
    assert s["cost_saved_usd"] == pytest.approx(gpt4o["saved"] * 2.5e-6, rel=1e-6)  # gpt-4o: $2.50 / M input tokens
    assert gpt4o["cost_saved_usd"] == pytest.approx(s["cost_saved_usd"]) and llama["cost_saved_usd"] is None


def test_cost_saved_is_null_when_no_model_in_the_window_has_a_price():
    now = 1_700_000_000.0
    minute = int(now // 60)
    rows = [(minute, "tokens_in", "model:my-llama", 900.0), (minute, "tokens_out", "model:my-llama", 400.0),
            (minute, "tokens_in", "", 900.0), (minute, "tokens_out", "", 400.0)]
    s = build(rows, "1h", alert_rate=None, now=now, price=input_price)
    assert s["tokens"]["saved"] == 500 and s["cost_saved_usd"] is None
    rows += [(minute, "tokens_in", "model:gpt-4o-mini", 2000.0), (minute, "tokens_out", "model:gpt-4o-mini", 1000.0)]
    s = build(rows, "1h", alert_rate=None, now=now, price=input_price)
    assert s["cost_saved_usd"] == pytest.approx(1000 * input_price("gpt-4o-mini"))  # the unpriced model adds nothing
    assert build([], "1h", alert_rate=None, now=now, price=input_price)["cost_saved_usd"] is None  # no traffic


def test_input_prices_are_litellms(monkeypatch):
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    assert input_price("gpt-4o") == litellm.model_cost["gpt-4o"]["input_cost_per_token"] > 0
    assert input_price("openai/gpt-4o") == input_price("gpt-4o")  # a provider prefix is looked through
    assert input_price("my-llama") is None and input_price("other") is None


def sse(stream_lines, n: int) -> list[str]:
    """The next `n` blocks of a text/event-stream (events and comments), each without its blank line."""
    blocks, lines = [], []
    for line in stream_lines:
        if line:
            lines.append(line)
            continue
        if lines:
            blocks.append("\n".join(lines))
            lines = []
        if len(blocks) == n:
            return blocks
    return blocks


def event_data(block: str) -> dict:
    return json.loads(next(line[len("data: "):] for line in block.split("\n") if line.startswith("data: ")))


def test_the_stream_sends_the_figures_then_each_change_and_keep_alives(start_proxy):
    proxy = start_proxy(OFF)
    chat(proxy, 2)
    url = f"{proxy.url}/admin/stats/stream"
    assert httpx.get(url).status_code == 401 and httpx.get(url, headers={"authorization": "Bearer x"}).status_code == 401
    assert httpx.get(url, params={"window": "1y"}, headers=AUTH).status_code == 400
    # The windows slide by the minute, so a minute turning is a change: start well inside one.
    if time.time() % 60 > 50:
        time.sleep(60.5 - time.time() % 60)
    with httpx.Client(timeout=30) as client, client.stream("GET", url, params={"window": "1d"}, headers=AUTH) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        stream_lines = r.iter_lines()
        opening, first, idle = sse(stream_lines, 3)
        assert opening == "retry: 1000\n: connected"
        figures = event_data(first)
        assert figures["window"] == "1d" and figures["requests"]["total"] == 2 and "cost_saved_usd" in figures
        assert idle == ": keep-alive"  # 2 s later, nothing changed (the same minute)
        started = time.monotonic()
        chat(proxy, 1)
        [changed] = sse(stream_lines, 1)
        assert event_data(changed)["requests"]["total"] == 3 and time.monotonic() - started < 5  # ≤ 5 s stale


def test_a_stream_wakes_on_a_flush_and_ends_by_itself_or_when_the_key_changes():
    async def figures():
        figures.calls += 1
        return {"n": figures.calls, "generated_at": time.time()}

    async def read(allowed, max_s, flush_after_s=None):
        figures.calls = 0
        flushes = live.Flushes()
        blocks = []
        async for block in live.events(figures, flushes, allowed, max_s=max_s):
            blocks.append(block)
            if flush_after_s is not None and len(blocks) == 2:
                asyncio.get_running_loop().call_later(flush_after_s, lambda: asyncio.ensure_future(flushes.notify()))
        return [b.strip() for b in blocks]

    started = time.monotonic()
    assert asyncio.run(read(lambda: True, max_s=0.0))[1].startswith('data: {"n":1,')  # ends after one event
    assert time.monotonic() - started < 1
    keys = iter([True, False])  # the admin key stops matching after the first wait
    started = time.monotonic()
    blocks = asyncio.run(read(lambda: next(keys), max_s=60.0, flush_after_s=0.2))
    assert [b[:12] for b in blocks] == ["retry: 1000\n", 'data: {"n":1', 'data: {"n":2']
    assert time.monotonic() - started < live.TICK_S + 1  # the flush woke the first wait early (0.2 s, not 2 s)


def test_stats_count_each_api(start_proxy, fake):
    """Chat completions, the Responses API and Anthropic's Messages API are one traffic to count."""
    import anthropic

    proxy = start_proxy({"upstream": {"anthropic": {"base_url": f"{fake.url}/v1", "api_key_env": None}}})
    chat(proxy, 2)
    openai_client(proxy).responses.create(model="gpt-4o", input="hi")
    anthropic.Anthropic(base_url=proxy.url, api_key="sk-ant", max_retries=0).messages.create(
        model="claude-test-model", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    s = stats(proxy)
    assert s["requests"]["by_api"] == {"chat": 2, "responses": 1, "messages": 1}
    assert {line["api"] for line in s["recent"]} == {"chat", "responses", "messages"}
