"""The proxy's own tool rounds (find_tools answered by the proxy, then the upstream asked again)
on all three APIs, through the real server: the answer reports what every round cost, the client
key is charged every round, and an upstream error in a later round is relayed as a first round's
would be (its status, its body, its retry-after)."""

from __future__ import annotations

import json
import time

import httpx
import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ctxwarden.policies.tools.search import FIND_TOOLS
from tests.conftest import policies_off
from tests.test_client_keys import ADMIN, ADMIN_KEY, PROVIDER, keyed, make_key  # noqa: F401 (the fixture)

TOOLS = [{"type": "function", "function": {"name": f"tool_{i}", "description": f"Does thing number {i}.",
                                           "parameters": {"type": "object", "properties": {}}}} for i in range(40)]
ANTHROPIC_TOOLS = [{"name": t["function"]["name"], "description": t["function"]["description"],
                    "input_schema": t["function"]["parameters"]} for t in TOOLS]
RESPONSES_TOOLS = [{"type": "function", **t["function"]} for t in TOOLS]
ASK = "Use tool number 7 please."
BODIES = {
    "/v1/chat/completions": {"model": "gpt-4o", "messages": [{"role": "user", "content": ASK}], "tools": TOOLS},
    "/v1/responses": {"model": "gpt-4o", "input": ASK, "tools": RESPONSES_TOOLS},
    "/v1/messages": {"model": "claude-x", "max_tokens": 50, "messages": [{"role": "user", "content": ASK}], "tools": ANTHROPIC_TOOLS},
}
INPUT = {"/v1/chat/completions": "prompt_tokens", "/v1/responses": "input_tokens", "/v1/messages": "input_tokens"}
SEARCH = {"name": FIND_TOOLS, "arguments": json.dumps({"query": "thing number 7"})}


def key_tokens(proxy, key_id: str) -> int:
    keys = httpx.get(f"{proxy.url}/admin/keys", headers=ADMIN).json()["keys"]
    return next(k for k in keys if k["id"] == key_id)["usage"]["tokens"]


@pytest.mark.parametrize("path", list(BODIES))
def test_every_round_is_reported_and_charged(keyed, fake, path):
    proxy = keyed(policies=policies_off("tools"))
    key, record = make_key(proxy)
    fake.reply(tool_calls=[SEARCH]).reply(tool_calls=[{"name": "tool_7", "arguments": "{}"}])
    r = httpx.post(f"{proxy.url}{path}", json=BODIES[path], headers={"authorization": f"Bearer {key}"}, timeout=30)
    assert r.status_code == 200, r.text
    assert "tools.search" in r.headers["x-ctxwarden-actions"]
    assert len(fake.received) == 2  # the proxy answered find_tools and asked again
    assert r.json()["usage"][INPUT[path]] == 20  # the fake reports 10 input tokens a call
    deadline = time.time() + 5
    while key_tokens(proxy, record["id"]) < 20 and time.time() < deadline:
        time.sleep(0.05)
    assert key_tokens(proxy, record["id"]) >= 22  # 2 x (10 in + at least 1 out)


UPSTREAM_429 = {
    "/v1/chat/completions": {"error": {"message": "Slow down, please.", "type": "rate_limit_error", "code": "rate_limit_exceeded", "param": None}},
    "/v1/responses": {"error": {"message": "Slow down, please.", "type": "rate_limit_error", "code": "rate_limit_exceeded", "param": None}},
    "/v1/messages": {"type": "error", "error": {"type": "rate_limit_error", "message": "Slow down, please."}},
}


@pytest.mark.parametrize("path", list(BODIES))
def test_an_upstream_error_in_a_later_round_is_relayed_as_it_came(start_proxy, fake, path):
    proxy = start_proxy({"policies": policies_off("tools"), "upstream": {"anthropic": {"base_url": f"{fake.url}/v1", "api_key_env": None}}})
    fake.reply(tool_calls=[SEARCH]).reply(status=429, json=UPSTREAM_429[path], headers={"retry-after": "7"})
    r = httpx.post(f"{proxy.url}{path}", json=BODIES[path], headers={"authorization": "Bearer sk-client"}, timeout=30)
    assert len(fake.received) == 2
    assert r.status_code == 429
    assert r.headers.get("retry-after") == "7"
    assert r.json() == UPSTREAM_429[path]



def test_each_streamed_round_is_a_call_of_its_own_with_its_usage(start_proxy, fake, monkeypatch):
    """A streamed chat answer across the proxy's tool rounds: one CLIENT span per upstream call, each
    with its round's usage and ended with its round (the first before the second began), while the
    client reads one answer whose usage is the sum, and the key is charged for both rounds."""
    monkeypatch.setenv("CTXWARDEN_ADMIN_KEY", ADMIN_KEY)
    monkeypatch.setenv(PROVIDER, "sk-proxy-own")
    exporter = InMemorySpanExporter()
    proxy = start_proxy({"auth": {"mode": "keys"}, "policies": policies_off("tools"), "upstream": {"api_key_env": PROVIDER}},
                        span_processors=[SimpleSpanProcessor(exporter)])
    key, record = make_key(proxy)
    fake.reply(tool_calls=[SEARCH]).reply(content="Using tool seven now.")
    body = {**BODIES["/v1/chat/completions"], "stream": True, "stream_options": {"include_usage": True}}
    with httpx.stream("POST", f"{proxy.url}/v1/chat/completions", json=body, headers={"authorization": f"Bearer {key}"},
                      timeout=30) as r:
        assert r.status_code == 200
        events = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: {")]
    httpx.get(f"{proxy.url}/healthz")  # the stream's spans end after its last byte
    assert len(fake.received) == 2
    usage = [e["usage"] for e in events if e.get("usage")]
    assert usage and usage[-1]["prompt_tokens"] == 20  # the client's one answer: both rounds
    calls = sorted((s for s in exporter.get_finished_spans() if s.name == "chat gpt-4o"), key=lambda s: s.start_time)
    assert len(calls) == 2, [s.name for s in exporter.get_finished_spans()]
    assert [s.attributes.get("gen_ai.usage.input_tokens") for s in calls] == [10, 10]
    assert all(s.attributes.get("gen_ai.response.model") == "gpt-4o" for s in calls)
    assert calls[0].end_time <= calls[1].start_time  # the first round's call ended with its round
    deadline = time.time() + 5
    while key_tokens(proxy, record["id"]) < 22 and time.time() < deadline:
        time.sleep(0.05)
    assert key_tokens(proxy, record["id"]) >= 22  # 2 x (10 in + at least 1 out)
