"""Unit tests of resolution, message edits, the clarifying question and the policy's invariants."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from ctxwarden.policies.base import Exchange, Services
from ctxwarden.policies.clash.detect import Located, local_clashes, text_keys
from ctxwarden.policies.clash.edit import apply_losses
from ctxwarden.policies.clash.policy import ClashConfig, ClashPolicy, user_texts
from ctxwarden.policies.clash.question import parse_choice, question
from ctxwarden.policies.clash.resolve import resolve
from ctxwarden.policies.clash.state import SessionState
from ctxwarden.policies.text.statements.extract import extract


class RecordingMetrics:
    def __init__(self) -> None:
        self.added: list[tuple[str, dict[str, Any]]] = []

    def add(self, name: str, value: float = 1, **attributes: Any) -> None:
        self.added.append((name, attributes))

    def record(self, name: str, value: float, **attributes: Any) -> None:
        pass

    def gauge(self, name: str, value: float, **attributes: Any) -> None:
        pass


def conversation(*turns: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for i, turn in enumerate(turns):
        if i:
            messages.append({"role": "assistant", "content": f"Answer {i}."})
        messages.append({"role": "user", "content": turn})
    return messages


def analyse(messages):
    texts = user_texts(messages)
    keys = text_keys(texts)
    found = [Located(m, p, keys[(m, p)], st) for (m, p), t in sorted(texts.items()) for st in extract(t)]
    return texts, found, local_clashes(found)


def settle(messages, strategy, state=None):
    texts, found, clashes = analyse(messages)
    res = resolve(clashes, strategy, state or SessionState(), messages, texts)
    return res, texts, found


def forwarded(messages, strategy):
    res, texts, found = settle(messages, strategy)
    out, _ = apply_losses(messages, res.losses, found, texts)
    return [m["content"] for m in out]


# ----------------------------------------------------------------------------- strategies


def test_prefer_recent_settles_a_chain_with_the_last_statement_live():
    messages = conversation("I want a budget hotel in Porto.", "I want a luxury hotel.", "Budget hotel again, please.")
    res, _, _ = settle(messages, "prefer_recent")
    assert sorted(loss.loser.message for loss in res.losses) == [0, 2]
    assert {loss.mode for loss in res.losses} == {"supersede"}


def test_keep_existing_keeps_the_first_statement_and_rejects_the_change():
    messages = conversation("I want a budget hotel in Porto.", "I want a luxury hotel.", "Budget hotel again, please.")
    res, _, _ = settle(messages, "keep_existing")
    assert [(loss.loser.message, loss.mode) for loss in res.losses] == [(2, "reject")]


def test_ask_user_settles_clashes_only_in_the_history_automatically():
    messages = conversation("I'm in Oslo.", "I'm in Bergen.", "What's the weather like?")
    res, _, _ = settle(messages, "ask_user")
    assert res.ask is None and [(loss.loser.message, loss.mode) for loss in res.losses] == [(0, "supersede")]
    res, _, _ = settle(messages[:3], "ask_user")
    assert res.ask is not None and res.losses == []


def test_remembered_decisions_are_reused():
    state = SessionState()
    messages = conversation("I'm in Oslo.", "I'm in Bergen.")
    first, _, _ = settle(messages, "prefer_recent", state)
    again, _, _ = settle(messages, "keep_existing", state)  # a decision stands even if the config changed
    assert len(first.decided) == 1 and again.decided == [] and again.remembered == 1
    assert again.losses == first.losses


# ----------------------------------------------------------------------------- edits


def test_removal_keeps_what_else_the_message_says():
    out = forwarded(conversation("Hi! We land on Friday. I'm in Oslo.", "I'm in Bergen now."), "prefer_recent")
    assert out == ["Hi! We land on Friday.", "Answer 1.", "I'm in Bergen now."]


def test_marking_when_removal_would_leave_nothing():
    out = forwarded(conversation("Thanks! I'm in Oslo.", "I'm in Bergen now."), "prefer_recent")
    assert out[0] == "Thanks! [superseded by a later message: current location] I'm in Oslo."


def test_a_sentence_with_other_live_statements_is_marked_not_cut():
    out = forwarded(conversation("I'm in Oslo and I want a window seat.", "I'm in Bergen now."), "prefer_recent")
    assert out[0] == "[superseded by a later message: current location] I'm in Oslo and I want a window seat."


def test_merge_fixes_the_article_of_the_new_value():
    out = forwarded(conversation("I'd like an aisle seat on the 7am train to Lyon, coach 4.", "Window seat please."), "merge")
    assert out[0] == "I'd like a window seat on the 7am train to Lyon, coach 4. [updated by a later message]"


def test_list_content_is_edited_on_copies():
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "Look at this map. I'm in Oslo."},
                                     {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
        {"role": "assistant", "content": "Nice map."},
        {"role": "user", "content": "I'm in Bergen now."},
    ]
    before = copy.deepcopy(messages)
    res, texts, found = settle(messages, "prefer_recent")
    out, stats = apply_losses(messages, res.losses, found, texts)
    assert messages == before
    assert out[0]["content"][0] == {"type": "text", "text": "Look at this map."}
    assert out[0]["content"][1] is messages[0]["content"][1] and out[1] is messages[1]
    assert stats.removed == 1


# ----------------------------------------------------------------------------- the question and its answer


@pytest.fixture
def budget_luxury():
    messages = conversation("I'm looking for budget hotels under $50 a night.", "Actually I want a luxury 5-star hotel.")
    texts, _, clashes = analyse(messages)
    return clashes[0], texts


def test_the_question_names_both_values_and_offers_the_options(budget_luxury):
    c, texts = budget_luxury
    text = question(c, texts)
    assert 'earlier you said "I\'m looking for budget hotels under $50 a night"' in text
    assert "1. Budget hotels (under $50 a night)\n2. Luxury 5-star hotel\n3. Flexible, either is fine" in text


@pytest.mark.parametrize(
    "reply, choice",
    [("1", "older"), ("Option 2", "newer"), ("the first one please", "older"), ("Luxury (5-star)", "newer"),
     ("budget, my bonus fell through", "older"), ("I'm flexible", "both"), ("either is fine", "both"),
     ("hmm, what do you mean?", None)],
)
def test_answers_are_read(budget_luxury, reply, choice):
    c, texts = budget_luxury
    assert parse_choice(reply, c, texts) == choice


# ----------------------------------------------------------------------------- the policy


def make_policy(strategy: str = "prefer_recent") -> tuple[ClashPolicy, RecordingMetrics]:
    metrics = RecordingMetrics()
    return ClashPolicy(ClashConfig(strategy=strategy), Services(tokens=None, metrics=metrics)), metrics  # type: ignore[arg-type]


def exchange(messages, session: str = "s1") -> Exchange:
    return Exchange(request_id="r1", model="gpt-4o", messages=messages, tools=None,
                    body={"model": "gpt-4o", "messages": messages}, session_id=session)


async def test_the_policy_never_mutates_the_clients_messages():
    policy, _ = make_policy()
    messages = conversation("We're 2 adults. I'm in Oslo.", "I'm in Bergen now.")
    before = copy.deepcopy(messages)
    ex = exchange(messages)
    assert await policy.on_request(ex) is None
    assert messages == before and ex.original_messages is messages
    assert ex.messages is not messages and ex.messages[0]["content"] == "We're 2 adults."
    assert [a.label for a in ex.actions] == ["clash.decided", "clash.resolve"]


async def test_untouched_requests_keep_the_clients_list():
    policy, metrics = make_policy()
    ex = exchange(conversation("I like parks.", "I also like museums."))
    await policy.on_request(ex)
    assert ex.messages is ex.original_messages and not ex.actions and not metrics.added


async def test_large_uncached_text_is_extracted_in_a_worker_thread(monkeypatch):
    import asyncio

    calls = []
    real = asyncio.to_thread

    async def spy(fn, *args, **kwargs):
        calls.append(fn)
        return await real(fn, *args, **kwargs)

    monkeypatch.setattr(asyncio, "to_thread", spy)  # what run_cpu hands heavy work to
    policy, _ = make_policy()
    long_text = " ".join(f"Step {i} of the plan is fine." for i in range(80)) + " I'm in Oslo."
    await policy.on_request(exchange(conversation(long_text, "I'm in Bergen now.")))
    assert len(calls) == 1
    await policy.on_request(exchange(conversation(long_text, "I'm in Bergen now.", "Thanks!")))
    assert len(calls) == 1  # cached by text hash: nothing left to extract off-loop


def test_a_message_repeated_word_for_word_is_its_own_statement():
    messages = conversation("I'm in Oslo.", "I'm in Bergen.", "I'm in Oslo.")
    res, _, _ = settle(messages, "prefer_recent")
    assert sorted(loss.loser.message for loss in res.losses) == [0, 2]


@pytest.mark.parametrize("strategy", ["keep_existing", "ask_user", "merge", "prefer_recent"])
def test_a_correction_is_resolved_as_prefer_recent_whatever_the_strategy(strategy):
    messages = conversation("The venue holds 120 guests.", "Correction: the venue holds 150 guests.")
    res, _, _ = settle(messages, strategy)
    assert res.ask is None
    assert [(loss.loser.message, loss.mode) for loss in res.losses] == [(0, "supersede")]
    assert [d.how for _, d in res.decided] == ["correction"]


async def test_the_policy_reports_a_correction():
    policy, metrics = make_policy("keep_existing")
    ex = exchange(conversation("The standup is at 9:30am.", "Oops, I meant 10:30am for the standup."))
    await policy.on_request(ex)
    assert "clash.correction" in [a.label for a in ex.actions]
    assert ex.messages[0]["content"].startswith("[superseded by a later message")
