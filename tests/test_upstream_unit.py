"""The upstream client with respx: retries, retry-after, breaker transitions, headers."""

from __future__ import annotations

import httpx
import pytest
import respx

from ctxwarden.proxy.config import UpstreamConfig
from ctxwarden.proxy.errors import ProxyError
from ctxwarden.proxy.upstream.breaker import CircuitBreaker
from ctxwarden.proxy.upstream.client import Upstream, retry_after_seconds

BASE = "http://upstream.test/v1"


def make(**overrides) -> Upstream:
    return Upstream(UpstreamConfig(base_url=BASE, http_client="httpx", api_key_env=None, backoff_s=0.001, **overrides))


@respx.mock
async def test_retries_connect_errors_then_succeeds():
    route = respx.post(f"{BASE}/chat/completions").mock(
        side_effect=[httpx.ConnectError("refused"), httpx.Response(200, json={"ok": True})]
    )
    up = make(retries=2)
    result = await up.send("POST", "chat/completions", b"{}", {})
    assert result.response.json() == {"ok": True}
    assert result.attempts == 2 and route.call_count == 2
    await up.aclose()


@respx.mock
async def test_honours_retry_after_on_429():
    route = respx.post(f"{BASE}/chat/completions").mock(
        side_effect=[httpx.Response(429, headers={"retry-after-ms": "5"}), httpx.Response(200, json={})]
    )
    up = make(retries=1)
    assert (await up.send("POST", "chat/completions", b"{}", {})).response.status_code == 200
    assert route.call_count == 2
    await up.aclose()


@respx.mock
async def test_long_retry_after_is_relayed_not_slept():
    route = respx.post(f"{BASE}/chat/completions").mock(return_value=httpx.Response(429, headers={"retry-after": "600"}))
    up = make(retries=3)
    result = await up.send("POST", "chat/completions", b"{}", {})
    assert result.response.status_code == 429 and route.call_count == 1
    await up.aclose()


@respx.mock
async def test_400_is_not_retried_and_does_not_trip_the_breaker():
    route = respx.post(f"{BASE}/chat/completions").mock(return_value=httpx.Response(400, json={}))
    up = make(retries=3)
    for _ in range(10):
        assert (await up.send("POST", "chat/completions", b"{}", {})).response.status_code == 400
    assert route.call_count == 10 and up.breaker.state == "closed"
    await up.aclose()


@respx.mock
async def test_exhausted_connect_retries_raise_502():
    respx.post(f"{BASE}/chat/completions").mock(side_effect=httpx.ConnectError("refused"))
    up = make(retries=1)
    with pytest.raises(ProxyError) as info:
        await up.send("POST", "chat/completions", b"{}", {})
    assert info.value.status == 502 and info.value.code == "upstream_unavailable"
    await up.aclose()


@respx.mock
async def test_read_timeout_is_504_without_retry():
    route = respx.post(f"{BASE}/chat/completions").mock(side_effect=httpx.ReadTimeout("slow"))
    up = make(retries=3)
    with pytest.raises(ProxyError) as info:
        await up.send("POST", "chat/completions", b"{}", {})
    assert info.value.status == 504 and route.call_count == 1
    await up.aclose()


def test_breaker_closed_open_half_open_closed():
    now = [0.0]
    breaker = CircuitBreaker(threshold=2, cooldown_s=10, clock=lambda: now[0])
    breaker.failure()
    assert breaker.state == "closed"
    breaker.failure()
    assert breaker.state == "open"
    with pytest.raises(ProxyError) as info:
        breaker.before_call()
    assert info.value.status == 503 and info.value.headers["retry-after"] == "10"
    now[0] = 10.0
    assert breaker.state == "half_open"
    breaker.before_call()  # the one trial call
    with pytest.raises(ProxyError):
        breaker.before_call()  # a second caller waits for the trial's outcome
    breaker.success()
    assert breaker.state == "closed"


def test_breaker_reopens_when_the_trial_fails():
    now = [0.0]
    breaker = CircuitBreaker(threshold=1, cooldown_s=5, clock=lambda: now[0])
    breaker.failure()
    now[0] = 6.0
    breaker.before_call()
    breaker.failure()
    assert breaker.state == "open"


def test_request_headers_drop_hop_by_hop_and_hints(monkeypatch):
    up = make()
    headers = up.request_headers({"Host": "x", "Content-Length": "3", "Authorization": "Bearer c",
                                  "X-Ctxwarden-Session": "s", "OpenAI-Organization": "org"})
    assert headers == {"Authorization": "Bearer c", "OpenAI-Organization": "org"}
    monkeypatch.setenv("MY_UPSTREAM_KEY", "sk-up")
    keyed = Upstream(UpstreamConfig(base_url=BASE, http_client="httpx", api_key_env="MY_UPSTREAM_KEY"))
    assert keyed.request_headers({"Authorization": "Bearer c"}) == {"authorization": "Bearer sk-up"}


def test_retry_after_parsing():
    assert retry_after_seconds({"retry-after": "3"}) == 3.0
    assert retry_after_seconds({"retry-after-ms": "250"}) == 0.25
    assert retry_after_seconds({}) is None
