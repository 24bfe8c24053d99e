"""Streams that flow: with poisoning on, text with nothing to judge reaches the client as it
arrives; a sentence that names something the KB knows (or a number or date) is held, from its
start, until it is judged whole, so a contradicted claim never leaks. Real proxy, official SDK, real Chroma, fake upstream."""

from __future__ import annotations

import time

import pytest

import ctxwarden.policies.poisoning.policy as poisoning_module
from ctxwarden.policies.base import Exchange
from tests.conftest import openai_client
from tests.test_poisoning_e2e import EIFFEL, admin_key, load_kb, poisoning  # noqa: F401 (admin_key: autouse)

CHATTY = "Well, that is a good question and I am happy to help you with it today."


def stream_timed(proxy, **kwargs):
    """(seconds from the first content delta to the last, the whole text, the finish reason).
    Measured from the first delta, not from the request, so a cold start does not count."""
    first, last, deltas, finish = None, None, [], None
    stream = openai_client(proxy).chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "Where is it?"}], stream=True, **kwargs)
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            last = time.perf_counter()
            first = first if first is not None else last
            deltas.append(chunk.choices[0].delta.content)
        if chunk.choices and chunk.choices[0].finish_reason:
            finish = chunk.choices[0].finish_reason
    return (last - first) if deltas else 0.0, "".join(deltas), finish


def test_text_with_nothing_to_judge_flows_while_the_sentence_is_still_streaming(fake, start_proxy):
    proxy = start_proxy(poisoning())
    load_kb(proxy)
    words = len(CHATTY.split())
    fake.reply(content=CHATTY, chunk_delay_s=0.08)  # the sentence takes ~1.2 s to stream
    spread, text, finish = stream_timed(proxy)
    assert text == CHATTY and finish == "stop"
    # held to its end, the sentence would arrive at once; flowing, its words arrive as streamed
    assert spread > 0.08 * words / 2, f"content arrived within {spread:.3f} s: the sentence was held to its end"


def test_a_false_claim_after_flowing_text_never_leaks(fake, start_proxy):
    proxy = start_proxy(poisoning())
    load_kb(proxy)
    fake.reply(content="Let me check that for you. The Eiffel Tower is located in London, which is lovely.",
               chunk_delay_s=0.01)
    _, text, finish = stream_timed(proxy)
    released, _, notice = text.partition("[ctxwarden]")
    assert released.startswith("Let me check that for you.")
    assert "London" not in released and "Eiffel" not in released and "lovely" not in released
    assert EIFFEL in notice and finish == "content_filter"


def test_with_an_empty_knowledge_base_every_sentence_flows(fake, start_proxy):
    proxy = start_proxy(poisoning())
    content = "In 2024 Paris had about 2,100,000 inhabitants, and many visitors came to see its museums and parks."
    fake.reply(content=content, chunk_delay_s=0.05)
    spread, text, _ = stream_timed(proxy)
    assert text == content
    words = len(content.split())
    assert spread > 0.05 * words / 2, f"content arrived within {spread:.3f} s although nothing can be judged"


@pytest.mark.parametrize("on_timeout, blocked", [("release", False), ("block", True)])
def test_a_slow_judgement_is_bounded_by_max_hold_ms(fake, start_proxy, monkeypatch, on_timeout, blocked):
    proxy = start_proxy(poisoning(stream={"max_hold_ms": 50, "on_timeout": on_timeout}))
    load_kb(proxy)
    slow = poisoning_module.answer_evidence

    def slow_retrieve(*args, **kwargs):
        time.sleep(0.3)
        return slow(*args, **kwargs)

    monkeypatch.setattr(poisoning_module, "answer_evidence", slow_retrieve)
    fake.reply(content="The Eiffel Tower is located in Paris. It is made of iron.")
    started = time.perf_counter()
    _, text, finish = stream_timed(proxy)
    if blocked:
        assert "could not be validated in time" in text and finish == "content_filter"
        assert "Paris" not in text
    else:
        assert text == "The Eiffel Tower is located in Paris. It is made of iron." and finish == "stop"
    assert time.perf_counter() - started < 2.0


def test_stream_releasable_holds_a_sentence_naming_what_the_kb_knows_and_any_unfinished_word(fake, start_proxy):
    proxy = start_proxy(poisoning())
    load_kb(proxy)
    policy = proxy.app.state.pipeline.policy("poisoning")
    policy.kb(None).index  # loaded, as on_request does for a stream
    ex = Exchange("r", "gpt-4o", [], None, {}, stream=True)
    assert policy.stream_releasable(ex, "Well, I think the answ") == len("Well, I think the ")
    assert policy.stream_releasable(ex, "I think the Eiffel Tower is") == len("I think the ")  # a name being written
    assert policy.stream_releasable(ex, "I think the Eiffel Tower is in ") == 0  # a claim the KB covers: held whole
    assert policy.stream_releasable(ex, "Sure. I think the Eiffel Tower is in ") == len("Sure. ")
    assert policy.stream_releasable(ex, "Sure. I think Zanzibar is nice, ") == len("Sure. I think Zanzibar is nice, ")
    assert policy.stream_releasable(ex, "It was built in 18") == len("It was built in ")
    assert policy.stream_releasable(ex, "Good question. The ") == len("Good question. ")  # "The" may open a name
    other = Exchange("r", "gpt-4o", [], None, {}, stream=True, tenant="empty-tenant")
    policy.kb("empty-tenant").index
    assert policy.stream_releasable(other, "The Eiffel Tower is in Ber") == len("The Eiffel Tower is in Ber")
