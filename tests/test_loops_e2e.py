"""End to end: the official openai SDK → the real proxy (loops policy) → the fake upstream."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from tests.conftest import openai_client, policies_off
from tests.test_loops_detect import A, B, convo

TOOLS = [
    {"type": "function", "function": {"name": "search_flights", "parameters": {"type": "object", "properties": {}}}},
    {"type": "function", "function": {"name": "get_price", "parameters": {"type": "object", "properties": {}}}},
]


def metric_lines(proxy, prefix: str) -> list[str]:
    text = httpx.get(f"{proxy.url}/metrics").text
    return [line for line in text.splitlines() if line.startswith(prefix)]


def metric_value(proxy, prefix: str) -> float:
    return float(metric_lines(proxy, prefix)[0].rsplit(" ", 1)[1])


def loops_config(**loops) -> dict:
    policies = policies_off("loops")
    policies["loops"] = {"enabled": True, **loops}
    return {"policies": policies}


def test_stop_answers_from_the_proxy_without_calling_upstream(fake, start_proxy):
    proxy = start_proxy(loops_config(action="stop"))
    client = openai_client(proxy)
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-4o", messages=convo(A(), B(), A(), B(), A(), B()), tools=TOOLS
    )
    answer = raw.parse()
    text = answer.choices[0].message.content
    assert answer.choices[0].finish_reason == "content_filter"
    assert raw.http_response.json()["ctxwarden"] == {"author": "proxy", "reason": "loops.stop"}
    assert "search_flights(" in text and "get_price(" in text and "3 times" in text
    assert raw.headers["x-ctxwarden-actions"] == "loops.stop"
    assert fake.chat_requests == []
    assert metric_value(proxy, 'ctxwarden_loops_detected_total{kind="cycle"}') == 1
    assert metric_value(proxy, "ctxwarden_loops_stops_total") == 1


def test_stop_while_streaming(fake, start_proxy):
    client = openai_client(start_proxy(loops_config(action="stop")))
    stream = client.chat.completions.create(model="gpt-4o", messages=convo(A(), A(), A()), tools=TOOLS, stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text.startswith("[ctxwarden] I stopped this agent run") and "search_flights(" in text
    assert fake.chat_requests == []


def test_varied_run_passes_through_untouched(fake, start_proxy):
    client = openai_client(start_proxy(loops_config(action="stop")))
    msgs = convo(A("error: timeout"), A("2 flights: AF12, TP44"), B())
    raw = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=msgs, tools=TOOLS)
    assert raw.headers["x-ctxwarden-actions"] == ""
    assert fake.chat_requests[0]["messages"] == msgs


def test_inject_adds_a_note_then_stops_the_continued_loop(fake, start_proxy):
    proxy = start_proxy(loops_config(action="inject"))
    client = openai_client(proxy)
    fake.reply(tool_calls=[{"id": "call_again", "name": "search_flights", "arguments": json.dumps(A()[1])}])
    msgs = convo(A(), B(), A(), B(), A(), B())
    raw = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=msgs, tools=TOOLS)
    assert raw.headers["x-ctxwarden-actions"] == "loops.inject"
    forwarded = fake.chat_requests[0]["messages"]
    assert forwarded[:-1] == msgs  # the client's conversation is an unchanged prefix
    assert forwarded[-1]["role"] == "user" and forwarded[-1]["content"].startswith("[ctxwarden]")  # no late system message
    assert "search_flights(" in forwarded[-1]["content"] and "get_price(" in forwarded[-1]["content"]

    # The model ignored the note and called search_flights again; the agent ran it and asks again.
    call = raw.parse().choices[0].message.tool_calls[0]
    msgs += [{"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
             {"role": "tool", "tool_call_id": call.id, "content": A()[2]}]
    raw2 = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=msgs, tools=TOOLS)
    assert raw2.headers["x-ctxwarden-actions"] == "loops.stop"
    assert "after a note" in raw2.parse().choices[0].message.content
    assert len(fake.chat_requests) == 1  # the continued loop never reached the upstream
    assert metric_value(proxy, "ctxwarden_loops_injections_total") == 1
    assert metric_value(proxy, "ctxwarden_loops_stops_total") == 1


def test_retry_counter_per_session(fake, start_proxy):
    proxy = start_proxy({**loops_config(max_retries=3), "models": {"tiny-model": {"context_window": 200}}})
    client = openai_client(proxy)
    oversized = [{"role": "user", "content": "Summarize: " + "lorem ipsum dolor sit amet " * 60}]

    def ask(session: str, messages: list[dict]):
        return client.chat.completions.create(model="tiny-model", messages=messages,
                                              extra_headers={"x-ctxwarden-session": session})

    for _ in range(3):
        with pytest.raises(openai.BadRequestError) as err:
            ask("alice", oversized)
        assert err.value.code == "context_length_exceeded"
    stopped = ask("alice", oversized).choices[0].message.content  # the 4th retry: the proxy answers
    assert "stopped retrying" in stopped and "budget.reject ×3" in stopped
    assert metric_value(proxy, "ctxwarden_loops_retries_exhausted_total") == 1
    with pytest.raises(openai.BadRequestError):  # another session is unaffected
        ask("bob", oversized)
    assert fake.chat_requests == []

    # A new user message in alice's session is tried; it succeeds, which resets her counter.
    ok = ask("alice", [{"role": "user", "content": "hi"}])
    assert ok.choices[0].message.content == "You said: hi"
    with pytest.raises(openai.BadRequestError):
        ask("alice", oversized)  # refused by the budget again, counted from zero
    assert len(fake.chat_requests) == 1
