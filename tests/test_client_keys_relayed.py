"""A client key's limits on the routes the proxy relays without handling them itself, through the
real server: the model a relayed request names is checked (JSON, Anthropic batches, multipart forms,
count_tokens), the usage a relayed answer reports is charged, a batch (billed later, out of the
proxy's sight) is refused to a key with limits, and a stream that asked for no usage is charged too."""

from __future__ import annotations

import time

import httpx
from starlette.responses import JSONResponse

from tests.conftest import policies_off
from tests.test_client_keys import ADMIN, PROVIDER, keyed, make_key  # noqa: F401 (the fixture)

COMPLETION = {"id": "cmpl-1", "object": "text_completion", "model": "gpt-4o", "choices": [{"text": "hi", "index": 0}],
              "usage": {"prompt_tokens": 5000, "completion_tokens": 10, "total_tokens": 5010}}


def bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


def tokens_of(proxy, key_id: str) -> int:
    deadline = time.time() + 3
    while True:
        keys = httpx.get(f"{proxy.url}/admin/keys", headers=ADMIN).json()["keys"]
        used = next(k for k in keys if k["id"] == key_id)["usage"]["tokens"]
        if used or time.time() > deadline:
            return used
        time.sleep(0.05)


def test_a_relayed_request_names_only_models_the_key_may_use(keyed, fake):
    proxy = keyed()
    mini, _ = make_key(proxy, models=["gpt-4o-mini*"])
    refused = [
        httpx.post(f"{proxy.url}/v1/completions", json={"model": "gpt-4o", "prompt": "hi"}, headers=bearer(mini)),
        httpx.post(f"{proxy.url}/v1/embeddings", json={"model": "text-embedding-3-large", "input": "hi"}, headers=bearer(mini)),
        httpx.post(f"{proxy.url}/v1/audio/transcriptions", headers=bearer(mini),
                   files={"file": ("a.wav", b"RIFF....", "audio/wav")}, data={"model": "whisper-1"}),
    ]
    for r in refused:
        assert r.status_code == 403 and r.json()["error"]["code"] == "model_not_allowed", r.text
    anthropic = [
        httpx.post(f"{proxy.url}/v1/messages/count_tokens", headers={"x-api-key": mini},
                   json={"model": "claude-x", "messages": [{"role": "user", "content": "hi"}]}),
        httpx.post(f"{proxy.url}/v1/messages/batches", headers={"x-api-key": mini}, json={"requests": [
            {"custom_id": "a", "params": {"model": "claude-x", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}}]}),
    ]
    for r in anthropic:
        assert r.status_code == 403 and r.json()["type"] == "error" and r.json()["error"]["type"] == "permission_error", r.text
    assert fake.paths == []  # none of them reached the upstream
    allowed = httpx.post(f"{proxy.url}/v1/embeddings", json={"model": "gpt-4o-mini-embed", "input": "hi"}, headers=bearer(mini))
    assert allowed.status_code == 200 and len(fake.received) == 1


def test_a_batch_is_refused_to_a_key_with_limits_and_relayed_for_one_without(keyed, fake):
    proxy = keyed()
    budgeted, _ = make_key(proxy, tenants=["*"], tokens_per_day=100_000)  # a key for every tenant: stored state is open
    free, _ = make_key(proxy, tenants=["*"])
    batch = {"input_file_id": "file-1", "endpoint": "/v1/chat/completions", "completion_window": "24h"}
    r = httpx.post(f"{proxy.url}/v1/batches", json=batch, headers=bearer(budgeted))
    assert r.status_code == 403 and r.json()["error"]["code"] == "batches_not_allowed"
    assert fake.paths == []
    r = httpx.post(f"{proxy.url}/v1/batches", json=batch, headers=bearer(free))
    assert r.status_code != 403 and fake.paths == ["/v1/batches"]  # relayed (the fake has no batches route: its 404)


STORED = [("GET", "/v1/responses/resp_a1", None), ("GET", "/v1/responses/resp_a1/input_items", None),
          ("GET", "/v1/chat/completions", None), ("GET", "/v1/files", None), ("GET", "/v1/files/file-a1/content", None),
          ("DELETE", "/v1/files/file-a1", None), ("GET", "/v1/batches", None), ("GET", "/v1/vector_stores", None),
          ("POST", "/v1/vector_stores", {"name": "x", "file_ids": ["file-a1"]}),  # a file its tenant did not make
          ("POST", "/v1/batches", {"input_file_id": "file-a1", "endpoint": "/v1/chat/completions", "completion_window": "24h"}),
          ("POST", "/v1/responses", {"model": "gpt-4o", "input": "go on", "previous_response_id": "resp_a1"}),
          ("POST", "/v1/responses", {"model": "gpt-4o", "input": "go on", "conversation": "conv_a1"})]


def test_what_the_provider_stores_is_closed_to_a_key_for_one_tenant(keyed, fake):
    """One provider key for every tenant: the provider keeps every tenant's stored objects together,
    so a key bound to one tenant reaches only the routes that store nothing there and what its tenant made."""
    proxy = keyed()
    one, _ = make_key(proxy, tenant="b")
    every, _ = make_key(proxy, tenant="ops", tenants=["*"])
    for method, path, body in STORED:
        r = httpx.request(method, f"{proxy.url}{path}", json=body, headers=bearer(one))
        assert r.status_code == 403 and r.json()["error"]["code"] == "shared_provider_state", (method, path, r.text)
    r = httpx.post(f"{proxy.url}/v1/messages", headers={"x-api-key": one}, json={
        "model": "claude-x", "max_tokens": 5, "container": "container_a1", "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 403 and r.json()["type"] == "error"
    assert fake.paths == []  # none reached the provider
    assert httpx.post(f"{proxy.url}/v1/embeddings", json={"model": "m", "input": "hi"}, headers=bearer(one)).status_code == 200
    assert httpx.get(f"{proxy.url}/v1/models", headers=bearer(one)).status_code == 200
    r = httpx.post(f"{proxy.url}/v1/responses", json={"model": "gpt-4o", "input": "go on", "previous_response_id": "resp_a1"},
                   headers=bearer(every))
    assert r.status_code == 200  # the operator's key for every tenant may
    assert fake.responses_requests[-1]["previous_response_id"] == "resp_a1"


def test_the_usage_a_relayed_answer_reports_is_charged(keyed, hostile, monkeypatch):
    async def completions(request):
        await request.body()
        return JSONResponse(COMPLETION)
    upstream = hostile(completions)
    proxy = keyed(upstream={"base_url": f"{upstream.url}/v1", "api_key_env": PROVIDER, "retries": 0,
                           "anthropic": {"base_url": None}})
    key, record = make_key(proxy, tokens_per_day=1_000_000)
    r = httpx.post(f"{proxy.url}/v1/completions", json={"model": "gpt-4o", "prompt": "hi"}, headers=bearer(key))
    assert r.status_code == 200
    assert tokens_of(proxy, record["id"]) == 5010


def test_a_stream_that_asks_for_no_usage_is_charged_and_gets_none(keyed, fake):
    proxy = keyed(policies=policies_off())
    key, record = make_key(proxy)
    body = {"model": "gpt-4o", "stream": True, "stream_options": {"include_usage": False},
            "messages": [{"role": "user", "content": "say three words"}]}
    r = httpx.post(f"{proxy.url}/v1/chat/completions", json=body, headers=bearer(key))
    assert r.status_code == 200 and '"usage"' not in r.text  # as the client asked
    assert fake.chat_requests[-1]["stream_options"] == {"include_usage": True}  # the proxy asked
    assert tokens_of(proxy, record["id"]) > 10  # the prompt's 10 and the completion's tokens, not the proxy's estimate
