"""Memory gates, end to end and in pieces: ask_user surfaces the question (RF-006 16-18), the write
gate rejects what the knowledge base contradicts (RF-005), a need put as a question is no memory."""

from __future__ import annotations

import httpx
import pytest

from ctxwarden.policies.memory.ask import parse_choice, question
from ctxwarden.policies.memory.extract import candidates
from ctxwarden.policies.memory.session import Given, OwnerBlocks, Pending, SessionState, decode, encode
from tests.conftest import openai_client, policies_off

ADMIN = {"authorization": "Bearer admin-test"}
BUDGET = "I prefer budget hotels."
LUXURY = "Actually I want luxury 5-star hotels now."


def send(proxy, messages, session="s1", user="alice"):
    client = openai_client(proxy, default_headers={"x-ctxwarden-session": session})
    raw = client.chat.completions.with_raw_response.create(model="gpt-4o", user=user, messages=messages)
    return raw.parse().choices[0].message.content, raw.headers.get("x-ctxwarden-actions", "")


def live_texts(proxy, user="alice", **headers):
    data = httpx.get(f"{proxy.url}/admin/memories", params={"user": user}, headers={**ADMIN, **headers}).json()["data"]
    return [m["text"] for m in data]


# ----------------------------------------------------------------------------- ask_user


@pytest.mark.parametrize(("reply", "kept"), [("2", [LUXURY]), ("Budget hotels, please", [BUDGET]),
                                             ("option 1", [BUDGET]), ("3", [BUDGET, LUXURY])])
def test_ask_user_asks_without_the_upstream_and_the_answer_settles_it(start_proxy, fake, monkeypatch, reply, kept):
    monkeypatch.setenv("CTXWARDEN_ADMIN_KEY", "admin-test")
    proxy = start_proxy({"policies": {**policies_off("memory"), "memory": {"enabled": True, "strategy": "ask_user"}}})
    send(proxy, [{"role": "user", "content": BUDGET}], session="old")
    calls = len(fake.chat_requests)
    turn = [{"role": "user", "content": LUXURY}]
    asked, actions = send(proxy, turn)
    assert len(fake.chat_requests) == calls  # answered by the proxy: the upstream was not called
    assert "memory.ask_user" in actions and "memory.write" in actions
    assert asked == question(BUDGET, LUXURY)
    assert '"I prefer budget hotels"' in asked and "1. I prefer budget hotels\n2. " in asked and "3. Both" in asked
    assert send(proxy, turn)[0] == asked  # the same turn sent again: the same question, still no upstream call
    assert len(fake.chat_requests) == calls

    _, actions = send(proxy, [*turn, {"role": "assistant", "content": asked}, {"role": "user", "content": reply}])
    assert len(fake.chat_requests) == calls + 1 and "memory.user_answer" in actions and "memory.ask_user" not in actions
    assert ("memory.supersede" in actions) == (len(kept) == 1)
    assert sorted(live_texts(proxy)) == sorted(kept)
    send(proxy, [{"role": "user", "content": "Find me a hotel in Rome for three nights."}], session="later")
    block = fake.chat_requests[-1]["messages"][-1]["content"].split("\n\n")[0]
    assert ("budget" in block) == (BUDGET in kept) and ("luxury" in block) == (LUXURY in kept)


def test_an_unclear_reply_keeps_both_and_is_not_asked_again(start_proxy, fake, monkeypatch):
    monkeypatch.setenv("CTXWARDEN_ADMIN_KEY", "admin-test")
    proxy = start_proxy({"policies": {**policies_off("memory"), "memory": {"enabled": True, "strategy": "ask_user"}}})
    send(proxy, [{"role": "user", "content": BUDGET}], session="old")
    asked, _ = send(proxy, [{"role": "user", "content": LUXURY}])
    turn = [{"role": "user", "content": LUXURY}, {"role": "assistant", "content": asked},
            {"role": "user", "content": "What's the weather in Rome?"}]
    _, actions = send(proxy, turn)
    assert "memory.ask_user" not in actions and fake.chat_requests[-1]["messages"][-1]["content"].endswith("Rome?")
    assert sorted(live_texts(proxy)) == sorted([BUDGET, LUXURY])


def test_a_pending_question_travels_in_the_session_document():
    state = SessionState()
    entry = state.owners["o"] = OwnerBlocks({"k#0": Given("Relevant context:\n- x", ("m1",))}, {"k#0": None})
    entry.pending = Pending("m1", "m2", BUDGET, LUXURY, "k#0")
    again = decode(encode(state))
    assert again.owners["o"].pending == entry.pending and again.owners["o"].blocks == entry.blocks
    old = {"owners": {"o": {"blocks": {}, "written": ["k#0"]}}}  # written before ask_user existed
    assert decode(old).owners["o"].pending is None


@pytest.mark.parametrize(("reply", "choice"), [
    ("1", "older"), ("the first one", "older"), ("Option 2", "newer"), ("two, please", "newer"), ("both", "both"),
    ("3", "both"), ("Luxury 5-star please", "newer"), ("luxury", "newer"), ("The budget hotels", "older"),
    ("Keep the budget one", "older"), ("what?", None), ("Find me a hotel in Rome", None)])
def test_the_answer_is_an_option_number_or_a_restatement(reply, choice):
    assert parse_choice(reply, BUDGET, LUXURY) == choice


def test_a_restated_place_picks_that_memory():
    assert parse_choice("Munich", "I live in Berlin.", "I live in Munich now.") == "newer"
    assert parse_choice("Berlin still", "I live in Berlin.", "I live in Munich now.") == "older"


# ----------------------------------------------------------------------------- consistency with the KB


def test_a_memory_the_knowledge_base_contradicts_is_not_stored(start_proxy, fake, monkeypatch):
    monkeypatch.setenv("CTXWARDEN_ADMIN_KEY", "admin-test")
    proxy = start_proxy({"policies": {**policies_off("memory", "poisoning"), "memory": {"enabled": True},
                                      "poisoning": {"enabled": True, "check_inputs": False}}})
    docs = [{"id": "office", "text": "The Acme office is in Berlin."},
            {"id": "limit", "text": "The Acme expense limit for hotels is 150 dollars a night."}]
    r = httpx.post(f"{proxy.url}/admin/kb/documents", headers=ADMIN, json={"documents": docs, "tenant": "acme"})
    assert r.status_code == 200, r.text
    acme = {"x-ctxwarden-tenant": "acme"}
    for text in ("Our Acme office is in Munich.", "My Acme expense limit for hotels is 300 dollars a night."):
        client = openai_client(proxy, default_headers=acme)
        raw = client.chat.completions.with_raw_response.create(model="gpt-4o", user="alice",
                                                               messages=[{"role": "user", "content": text}])
        actions = raw.headers.get("x-ctxwarden-actions", "")
        assert "memory.rejected" in actions and "memory.write" not in actions
    client = openai_client(proxy, default_headers=acme)
    raw = client.chat.completions.with_raw_response.create(model="gpt-4o", user="alice",
                                                           messages=[{"role": "user", "content": "I prefer aisle seats."}])
    assert "memory.write" in raw.headers.get("x-ctxwarden-actions", "")
    assert live_texts(proxy, **acme) == ["I prefer aisle seats."]
    # another tenant's KB says nothing of it: stored there
    raw = openai_client(proxy).chat.completions.with_raw_response.create(
        model="gpt-4o", user="alice", messages=[{"role": "user", "content": "Our Acme office is in Munich."}])
    assert "memory.write" in raw.headers.get("x-ctxwarden-actions", "")


# ----------------------------------------------------------------------------- a need put as a question


@pytest.mark.parametrize("text", [
    "I need a room for two nights in Copenhagen, any ideas?",
    "I need a room for two nights in Copenhagen. Any ideas?",
    "We need a table for four at 8pm, what do you suggest?",
    "I need two tickets to Vienna, any suggestions?",
    "I would like a table for two in Soho, what do you suggest?",
    "I want a cheap room in Copenhagen for two nights, where should I look?",
    # a question that takes something as given ("the hotel we booked") still asks
    "I need a room for two nights in Copenhagen. Can you check the hotel we booked in Oslo?",
    "Will ibuprofen interact with the warfarin I take every evening?",
])
def test_a_need_put_as_a_question_is_no_memory(text):
    assert candidates(text) == []


@pytest.mark.parametrize(("text", "kept"), [
    ("I'm vegetarian, can you suggest a restaurant in Rome?", "I'm vegetarian, can you suggest a restaurant in Rome?"),
    ("I'm vegetarian. Any ideas for dinner?", "I'm vegetarian."),
    ("I prefer aisle seats. Can you book one?", "I prefer aisle seats."),
    ("I need a flat with at least two bedrooms.", "I need a flat with at least two bedrooms."),
])
def test_a_lasting_statement_beside_a_question_is_still_a_memory(text, kept):
    assert [c.text for c in candidates(text)] == [kept]
