"""An answer the knowledge base contradicts is replaced by the proxy's notice, and says so in its
metadata as well as in its first words, on every API, plain and streamed: a top-level "ctxwarden"
mark {"author": "proxy", "reason": "answer_blocked"} (on the notice's chunk in a chat stream), and
on the Messages API the same stop_reason, refusal, plain or streamed."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.test_poisoning_e2e import admin_key, load_kb, poisoning  # noqa: F401 (the fixture)

MARK = {"author": "proxy", "reason": "answer_blocked"}
FALSE = "The Eiffel Tower is located in London."


@pytest.fixture
def proxy(start_proxy, fake):
    config = {**poisoning(), "upstream": {"anthropic": {"base_url": f"{fake.url}/v1", "api_key_env": None}}}
    server = start_proxy(config)
    load_kb(server)
    return server


def events(text: str) -> list[dict]:
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: {")]


def test_a_blocked_chat_answer_is_marked_plain_and_streamed(proxy, fake):
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Where is the Eiffel Tower?"}]}
    fake.reply(content=FALSE)
    plain = httpx.post(f"{proxy.url}/v1/chat/completions", json=body).json()
    assert plain["choices"][0]["finish_reason"] == "content_filter"
    assert plain["ctxwarden"] == {**MARK, "choices": [0]}
    assert plain["choices"][0]["message"]["content"].startswith("[ctxwarden]")
    fake.reply(content=FALSE)
    chunks = events(httpx.post(f"{proxy.url}/v1/chat/completions", json={**body, "stream": True}).text)
    notice = [c for c in chunks if c.get("ctxwarden")]
    assert len(notice) == 1 and notice[0]["ctxwarden"] == MARK
    assert notice[0]["choices"][0]["delta"]["content"].lstrip().startswith("[ctxwarden]")


def test_a_blocked_responses_answer_is_marked(proxy, fake):
    fake.reply(content=FALSE)
    data = httpx.post(f"{proxy.url}/v1/responses", json={"model": "gpt-4o", "input": "Where is the Eiffel Tower?"}).json()
    assert data["ctxwarden"] == MARK
    assert data["output"][0]["content"][0]["text"].startswith("[ctxwarden]")


def test_a_blocked_message_is_a_refusal_plain_as_streamed(proxy, fake):
    body = {"model": "claude-x", "max_tokens": 50, "messages": [{"role": "user", "content": "Where is the Eiffel Tower?"}]}
    fake.reply(content=FALSE)
    plain = httpx.post(f"{proxy.url}/v1/messages", json=body).json()
    assert plain["stop_reason"] == "refusal" and plain["ctxwarden"] == MARK
    assert plain["content"][0]["text"].startswith("[ctxwarden]")
    fake.reply(content=FALSE)
    streamed = events(httpx.post(f"{proxy.url}/v1/messages", json={**body, "stream": True}).text)
    stop = [e for e in streamed if e.get("type") == "message_delta"]
    assert stop[-1]["delta"]["stop_reason"] == "refusal" and stop[-1]["ctxwarden"]["author"] == "proxy"


def test_a_blocked_chat_stream_still_reports_usage_estimated_by_the_proxy(proxy, fake):
    """A block ends the stream before the upstream's usage (it comes last); a client that asked for
    usage gets the proxy's estimate, marked as such, rather than none."""
    body = {"model": "gpt-4o", "stream": True, "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": "Where is the Eiffel Tower?"}]}
    fake.reply(content=FALSE + " Many visitors go there each year, and the views are wonderful from the top.")
    chunks = events(httpx.post(f"{proxy.url}/v1/chat/completions", json=body).text)  # blocked at its first sentence
    usage = [c["usage"] for c in chunks if c.get("usage")]
    assert len(usage) == 1 and usage[0]["ctxwarden"] == "estimated"
    assert usage[0]["prompt_tokens"] > 0 and usage[0]["completion_tokens"] > 0
    assert usage[0]["total_tokens"] == usage[0]["prompt_tokens"] + usage[0]["completion_tokens"]


def test_a_chat_answer_without_sentence_ends_is_judged_piece_by_piece(proxy, fake):
    """A long one-line answer was held and rescanned whole at every chunk until its end (quadratic,
    on the event loop: ~46 s for 32 KB); it is judged in pieces within a claim's bound as it streams."""
    line = " ".join(f"item{n}={n * 7}," for n in range(1500))  # ~15 KB, no sentence end
    fake.reply(content=line)
    body = {"model": "gpt-4o", "stream": True, "messages": [{"role": "user", "content": "List the items."}]}
    text = httpx.post(f"{proxy.url}/v1/chat/completions", json=body, timeout=60).text
    streamed = "".join(c["choices"][0]["delta"].get("content") or "" for c in events(text) if c.get("choices"))
    assert streamed == line
    metrics = httpx.get(f"{proxy.url}/metrics").text
    partial = [ln for ln in metrics.splitlines() if "poisoning_validation" in ln and "_count" in ln and 'partial="True"' in ln]
    assert partial, [ln for ln in metrics.splitlines() if "poisoning_validation" in ln]
    assert float(partial[0].rsplit(" ", 1)[1]) >= 20  # ~15 KB in pieces of at most 500 characters
