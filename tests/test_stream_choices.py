"""Streams with n > 1 and answer checking (issue 13, C.22): each choice is judged and ended on its
own; a blocked choice never truncates the others. Real proxy, official SDK, real Chroma, fake upstream."""

from __future__ import annotations

from collections import defaultdict

import httpx

from tests.conftest import openai_client
from tests.test_poisoning_e2e import EIFFEL, admin_key, load_kb, poisoning  # noqa: F401 (admin_key: autouse)

FALSE = "The Eiffel Tower is located in London."
CHAT = "Hello! Nice to meet you. How can I help you today?"
TRUE = "The Eiffel Tower is located in Paris. It is made of iron."


def stream_choices(proxy, n: int, **kwargs):
    """({index: text}, {index: finish_reason}, how many chunks carried usage) over the whole stream."""
    texts: dict[int, str] = defaultdict(str)
    finishes: dict[int, str] = {}
    usage = 0
    stream = openai_client(proxy, timeout=30).chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "Where is it?"}], stream=True, n=n, **kwargs)
    for chunk in stream:
        usage += chunk.usage is not None
        for choice in chunk.choices:
            texts[choice.index] += choice.delta.content or ""
            if choice.finish_reason:
                assert choice.index not in finishes, f"choice {choice.index} finished twice"
                finishes[choice.index] = choice.finish_reason
    return dict(texts), finishes, usage


def test_one_blocked_choice_does_not_truncate_the_others(fake, start_proxy):
    proxy = start_proxy(poisoning())
    load_kb(proxy)
    fake.reply(choices=[FALSE, CHAT, TRUE])
    texts, finishes, usage = stream_choices(proxy, 3, stream_options={"include_usage": True})
    assert finishes == {0: "content_filter", 1: "stop", 2: "stop"}
    released, mark, notice = texts[0].partition("[ctxwarden]")
    assert mark and "London" not in released and EIFFEL in notice
    assert texts[1] == CHAT
    assert texts[2] == TRUE
    assert usage == 1


def test_a_choice_blocked_after_the_others_finished_keeps_theirs(fake, start_proxy):
    proxy = start_proxy(poisoning())
    load_kb(proxy)
    fake.reply(choices=["Hi.", "Sure. " + FALSE])  # choice 0 is done long before choice 1 is judged
    texts, finishes, _ = stream_choices(proxy, 2)
    assert texts[0] == "Hi." and finishes[0] == "stop"
    released, mark, _ = texts[1].partition("[ctxwarden]")
    assert released.strip() == "Sure." and mark and finishes[1] == "content_filter"


def test_when_every_choice_is_blocked_the_stream_ends(fake, start_proxy):
    proxy = start_proxy(poisoning())
    load_kb(proxy)
    fake.reply(choices=[FALSE, FALSE + " It is very tall and people like it a lot."])
    with httpx.stream("POST", f"{proxy.url}/v1/chat/completions", json={
            "model": "gpt-4o", "messages": [{"role": "user", "content": "Where?"}], "stream": True, "n": 2}) as r:
        body = r.read().decode()
    assert body.endswith("data: [DONE]\n\n") and body.count("[DONE]") == 1
    assert body.count('"finish_reason":"content_filter"') == 2
    assert body.count("[ctxwarden]") == 2 and "tall" not in body
    assert body.count("London") == 2  # only where each notice quotes the rejected claim


def test_a_plain_answer_with_n_choices_is_judged_per_choice(fake, start_proxy):
    proxy = start_proxy(poisoning())
    load_kb(proxy)
    fake.reply(choices=[FALSE, CHAT])
    r = openai_client(proxy).chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "Where?"}], n=2)
    assert r.choices[0].finish_reason == "content_filter" and r.choices[0].message.content.startswith("[ctxwarden]")
    assert r.choices[1].message.content == CHAT and r.choices[1].finish_reason == "stop"
