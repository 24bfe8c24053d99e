"""Issue 43, held-out hardening checks on streamed chat completions, through the real server:
a garbled upstream event ends the stream with an error event in every relay mode (fault 2), and the
choices of an n > 1 stream are judged each on its own (fault 6)."""

from __future__ import annotations

import json
from collections import defaultdict

import httpx
import pytest

from tests.conftest import openai_client, policies_off
from tests.test_poisoning_e2e import EIFFEL, admin_key, load_kb, poisoning  # noqa: F401 (admin_key: autouse)

FALSE = "The Eiffel Tower is located in London."
TRUE = "The Eiffel Tower is located in Paris."
GARBLE = "{this is not json"


def raw_stream(proxy, **body) -> str:
    with httpx.stream("POST", f"{proxy.url}/v1/chat/completions", timeout=30, json={
            "model": "gpt-4o", "messages": [{"role": "user", "content": "Where is it?"}], "stream": True, **body}) as r:
        assert r.status_code == 200
        return r.read().decode()


def data_events(body: str) -> list[str]:
    return [line[len("data: "):] for line in body.split("\n") if line.startswith("data: ")]


@pytest.mark.parametrize("config", [
    pytest.param({"policies": policies_off()}, id="policies-off"),  # pass-through
    pytest.param({}, id="default"),
    pytest.param({"_kb": True}, id="default-with-kb"),  # the gated relay
])
def test_a_garbled_upstream_event_ends_the_stream_with_an_error_event(fake, start_proxy, config):
    kb = config.pop("_kb", False)
    proxy = start_proxy(config)
    if kb:
        load_kb(proxy)
    fake.script.append({"content": "Hello there, how are you doing today?", "garble_after": 3})
    body = raw_stream(proxy)
    events = data_events(body)
    assert f"data: {GARBLE}" not in body, "the garbled event was relayed verbatim"  # (the error message quotes it)
    assert "[DONE]" not in body, "a broken stream must not end as if it were complete"
    last = json.loads(events[-1])
    assert last["error"]["code"] == "upstream_invalid_stream"
    chunks = [json.loads(e) for e in events[:-1]]
    assert all("choices" in c for c in chunks) and len(chunks) <= 3  # only what came before the garbage


def test_a_garbled_event_makes_the_sdk_raise(fake, start_proxy):
    import openai

    proxy = start_proxy({"policies": policies_off()})
    fake.script.append({"content": "Hello there, how are you doing today?", "garble_after": 3})
    stream = openai_client(proxy).chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "hi"}], stream=True)
    with pytest.raises(openai.APIError):
        for _ in stream:
            pass


def test_a_stream_split_mid_event_still_passes_through_whole(fake, start_proxy):
    """Detecting garbage must not mistake an event split across reads, or a comment, for one."""
    proxy = start_proxy({"policies": policies_off()})
    text = "Quotes \"and\" braces {like these} and a colon: fine. " * 40
    fake.script.append({"content": text})
    body = raw_stream(proxy, stream_options={"include_usage": True})
    assert body.endswith("data: [DONE]\n\n") and "error" not in body
    said = "".join((json.loads(e)["choices"] or [{}])[0].get("delta", {}).get("content") or ""
                   for e in data_events(body) if e != "[DONE]")
    assert said == text


def stream_choices(proxy, n: int):
    texts: dict[int, str] = defaultdict(str)
    finishes: dict[int, str] = {}
    stream = openai_client(proxy, timeout=30).chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "Where is the Eiffel Tower?"}], stream=True, n=n)
    for chunk in stream:
        for choice in chunk.choices:
            texts[choice.index] += choice.delta.content or ""
            if choice.finish_reason:
                assert choice.index not in finishes, f"choice {choice.index} finished twice"
                finishes[choice.index] = choice.finish_reason
    return dict(texts), finishes


def test_n2_each_choice_judged_on_its_own(fake, start_proxy):
    proxy = start_proxy(poisoning())
    load_kb(proxy, [{"id": "eiffel", "text": EIFFEL}])
    fake.script.append({"choices": [FALSE, TRUE]})
    texts, finishes = stream_choices(proxy, 2)
    assert finishes == {0: "content_filter", 1: "stop"}
    released, mark, notice = texts[0].partition("[ctxwarden]")
    assert mark and "London" not in released and not released.strip()
    assert EIFFEL in notice
    assert texts[1] == TRUE


def test_n2_the_true_choice_first(fake, start_proxy):
    proxy = start_proxy(poisoning())
    load_kb(proxy, [{"id": "eiffel", "text": EIFFEL}])
    fake.script.append({"choices": [TRUE, FALSE]})
    texts, finishes = stream_choices(proxy, 2)
    assert finishes == {0: "stop", 1: "content_filter"}
    assert texts[0] == TRUE
    released, mark, _ = texts[1].partition("[ctxwarden]")
    assert mark and "London" not in released


def test_the_pass_through_guard_reads_events_not_reads():
    """What the pass-through check lets out: whole events as they came (split across reads, CRLF,
    comments, multi-line data, [DONE] without its blank line), JSON that only json.loads reads, and
    nothing from the first event that is neither JSON nor [DONE] on."""
    from ctxwarden.proxy.streaming.sse import PassGuard

    def run(chunks, strip=False):
        guard = PassGuard(strip)
        out = b"".join(guard.feed(c) for c in chunks)
        return out + guard.rest(), guard.problem

    a = b'data: {"choices":[{"index":0,"delta":{"content":"a"}}]}\n\n'
    usage = b'data: {"choices":[],"usage":{"prompt_tokens":1}}\n\n'
    assert run([a, usage, b"data: [DONE]\n\n"], strip=True) == (a + b"data: [DONE]\n\n", None)
    assert run([a + usage + b": ping\n\n"], strip=False) == (a + usage + b": ping\n\n", None)
    assert run([a[:10], a[10:] + b"data: {bad\n\n" + a])[0] == a
    assert "not valid JSON" in run([b"data: {bad\n\n"])[1]
    odd = b'event: x\ndata: {"a":\ndata: 1}\n\nid: 3\n\ndata:\n\ndata: "\\ud800"\n\n'
    assert run([odd, b"data: [DONE]"]) == (odd + b"data: [DONE]", None)
    assert run([a.replace(b"\n\n", b"\r\n\r"), b"\n"]) == (a, None)
    out, problem = run([a[:20]])  # an event cut off at the end: never relayed (the relay reports the cut)
    assert out == b"" and problem.startswith("an event's data is not valid JSON: '{\"choices\"")
