"""End-to-end: the clash policy behind the real proxy, driven by the official openai SDK."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.conftest import openai_client, policies_off

SYSTEM = {"role": "system", "content": "You are a travel agent."}
BUDGET = "I'm planning a trip to Paris in May. I'm looking for budget hotels under $50 a night."
LUXURY = "Actually, I want a luxury 5-star hotel instead. What do you suggest?"
BUDGET_LUXURY = [
    SYSTEM,
    {"role": "user", "content": BUDGET},
    {"role": "assistant", "content": "Here are three budget hotels near the Marais."},
    {"role": "user", "content": LUXURY},
]


def clash_only(strategy: str = "prefer_recent", **extra) -> dict:
    return {"policies": {**policies_off("clash"), "clash": {"enabled": True, "strategy": strategy, **extra}}}


def send(proxy, messages, **kwargs):
    raw = openai_client(proxy).chat.completions.with_raw_response.create(model="gpt-4o", messages=messages, **kwargs)
    return raw.parse(), raw.headers.get("x-ctxwarden-actions", "").split(",")


def forwarded(fake, n: int = 0) -> list[dict]:
    return fake.chat_requests[n]["messages"]


# ----------------------------------------------------------------------------- budget → luxury, each strategy


def test_prefer_recent_removes_the_older_budget_preference(fake, start_proxy):
    proxy = start_proxy(clash_only("prefer_recent"))
    _, actions = send(proxy, BUDGET_LUXURY)
    sent = forwarded(fake)
    assert "clash.resolve" in actions
    assert sent[1] == {"role": "user", "content": "I'm planning a trip to Paris in May."}
    assert sent[3]["content"] == LUXURY
    assert sent[0] == SYSTEM and sent[2] == BUDGET_LUXURY[2]


def test_prefer_recent_marks_the_older_statement_when_removal_would_empty_its_message(fake, start_proxy):
    proxy = start_proxy(clash_only("prefer_recent"))
    messages = [SYSTEM, {"role": "user", "content": "I'm looking for budget hotels under $50 a night."},
                {"role": "assistant", "content": "Noted."}, {"role": "user", "content": LUXURY}]
    send(proxy, messages)
    assert forwarded(fake)[1]["content"] == (
        "[superseded by a later message: hotel preference] I'm looking for budget hotels under $50 a night."
    )
    assert forwarded(fake)[3]["content"] == LUXURY


def test_merge_falls_back_to_prefer_recent_when_nothing_compatible_is_left(fake, start_proxy):
    proxy = start_proxy(clash_only("merge"))
    _, actions = send(proxy, BUDGET_LUXURY)
    assert {"clash.resolve", "clash.merge_fallback"} <= set(actions)
    assert forwarded(fake)[1]["content"] == "I'm planning a trip to Paris in May."
    assert forwarded(fake)[3]["content"] == LUXURY


def test_merge_writes_the_newer_value_into_the_older_sentence(fake, start_proxy):
    proxy = start_proxy(clash_only("merge"))
    messages = [SYSTEM, {"role": "user", "content": "Book me a window seat on the 9am flight to Rome on March 3."},
                {"role": "assistant", "content": "Done."}, {"role": "user", "content": "Make it an aisle seat please."}]
    _, actions = send(proxy, messages)
    assert "clash.merge_fallback" not in actions
    assert forwarded(fake)[1]["content"] == (
        "Book me an aisle seat on the 9am flight to Rome on March 3. [updated by a later message]"
    )


def test_keep_existing_marks_the_newer_statement(fake, start_proxy):
    proxy = start_proxy(clash_only("keep_existing"))
    send(proxy, BUDGET_LUXURY)
    assert forwarded(fake)[1]["content"] == BUDGET
    assert forwarded(fake)[3]["content"] == (
        "[not applied, it conflicts with an earlier message: hotel preference] "
        "Actually, I want a luxury 5-star hotel instead. What do you suggest?"
    )


@pytest.mark.parametrize("stream", [False, True])
def test_ask_user_answers_with_a_clarifying_question_and_does_not_call_upstream(fake, start_proxy, stream):
    proxy = start_proxy(clash_only("ask_user"))
    client = openai_client(proxy)
    if stream:
        chunks = client.chat.completions.create(model="gpt-4o", messages=BUDGET_LUXURY, stream=True)
        answer = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    else:
        answer = client.chat.completions.create(model="gpt-4o", messages=BUDGET_LUXURY).choices[0].message.content
    assert fake.chat_requests == []
    assert "budget hotels under $50 a night" in answer and "luxury 5-star hotel" in answer
    assert "1. Budget hotels (under $50 a night)\n2. Luxury 5-star hotel\n3. Flexible, either is fine" in answer


@pytest.mark.parametrize(
    ("reply", "budget_note", "luxury_note"),
    [("2", True, False), ("Budget (< $50) please", False, True), ("Flexible", False, False)],
)
def test_ask_user_reply_settles_the_clash_and_it_is_not_asked_again(fake, start_proxy, reply, budget_note, luxury_note):
    proxy = start_proxy(clash_only("ask_user"))
    question, _ = send(proxy, BUDGET_LUXURY)
    turn2 = [*BUDGET_LUXURY, {"role": "assistant", "content": question.choices[0].message.content},
             {"role": "user", "content": reply}]
    _, actions = send(proxy, turn2)
    assert "clash.user_answer" in actions and "clash.ask_user" not in actions
    sent = forwarded(fake)
    note = "[no longer applies, the user confirmed a different hotel preference] "
    assert (sent[1]["content"] == f"I'm planning a trip to Paris in May. {note}I'm looking for budget hotels under $50 a night.") == budget_note
    assert (sent[3]["content"] == f"{note}{LUXURY}") == luxury_note
    assert sent[1]["content"] in (BUDGET, f"I'm planning a trip to Paris in May. {note}I'm looking for budget hotels under $50 a night.")
    assert sent[4:] == turn2[4:]
    # the next turn forwards the same prefix (cache-stable) and still does not ask
    turn3 = [*turn2, {"role": "assistant", "content": "Noted."}, {"role": "user", "content": "Anything near the Louvre?"}]
    _, actions = send(proxy, turn3)
    assert "clash.ask_user" not in actions
    assert forwarded(fake, 1)[: len(sent)] == sent


# ----------------------------------------------------------------------------- New York / London


def test_new_york_then_london_prefers_the_recent_location(fake, start_proxy):
    proxy = start_proxy(clash_only("prefer_recent"))
    messages = [SYSTEM, {"role": "user", "content": "I'm in New York. Can you find me a good pizza place nearby?"},
                {"role": "assistant", "content": "Try Joe's Pizza on Carmine Street."},
                {"role": "user", "content": "I'm in London now, actually. What about here?"}]
    send(proxy, messages)
    assert forwarded(fake)[1]["content"] == "Can you find me a good pizza place nearby?"
    assert forwarded(fake)[3]["content"] == messages[3]["content"]


@pytest.mark.parametrize("strategy", ["note", "prefer_recent", "ask_user", "keep_existing"])
@pytest.mark.parametrize("text", [
    "User location: New York\nUser location: London\nFind me a hotel.",
    "Scale the deployment from 2 replicas to 5 replicas.",
    "I have 2 kids aged 5 and 8, plan a trip to Rome.",
    "Flight from NYC to London, then London to Paris.",
    "Convert 5 miles to km, then 10 miles to km.",
    "I want a window seat. No wait, make that an aisle seat.",
])
def test_values_within_one_message_are_never_a_clash_whatever_the_strategy(fake, start_proxy, strategy, text):
    """Two values of one kind in one message are a range, a comparison, a conversion or a plan: the
    request reaches the model as sent, whatever the strategy (issue 41: 5 of 16 such requests were
    answered by the proxy with a question of its own)."""
    proxy = start_proxy(clash_only(strategy))
    messages = [SYSTEM, {"role": "user", "content": text}]
    answer, actions = send(proxy, messages)
    assert forwarded(fake) == messages
    assert not [a for a in actions if a.startswith("clash.")]
    assert answer.choices[0].message.content == f"You said: {text}"  # the fake upstream echoes: the model answered


def test_the_default_note_names_both_statements_after_the_users_words_and_stays_put(fake, start_proxy):
    """The default strategy changes no word the user wrote: the message with the later value gets a
    note for the model after them, and every later turn forwards that message with the same bytes."""
    proxy = start_proxy({"policies": {**policies_off("clash"), "clash": {"enabled": True}}})
    answer, actions = send(proxy, BUDGET_LUXURY)
    sent = forwarded(fake)
    assert "clash.note" in actions and not {"clash.resolve", "clash.ask_user"} & set(actions)
    assert sent[:3] == BUDGET_LUXURY[:3]
    latest = sent[3]["content"]
    assert latest.startswith(LUXURY + "\n\n[ctxwarden note: Earlier the user said ")
    assert "budget hotels under $50 a night" in latest and "luxury 5-star hotel" in latest and latest.endswith("]")
    # the next turns: the same bytes for that message, and the note is not repeated on the new one
    turn2 = [*BUDGET_LUXURY, {"role": "assistant", "content": answer.choices[0].message.content},
             {"role": "user", "content": "Great, book the first one for 3 nights."}]
    send(proxy, turn2)
    again = forwarded(fake, 1)
    assert again[:4] == sent[:4] and again[5:] == turn2[5:]


def test_a_note_travels_as_a_text_part_when_the_message_has_parts(fake, start_proxy):
    proxy = start_proxy({"policies": {**policies_off("clash"), "clash": {"enabled": True}}})
    parts = [{"type": "text", "text": LUXURY}]
    send(proxy, [*BUDGET_LUXURY[:3], {"role": "user", "content": parts}])
    sent = forwarded(fake)[3]["content"]
    assert sent[0] == parts[0] and len(sent) == 2 and sent[1]["text"].startswith("[ctxwarden note: ")


# ----------------------------------------------------------------------------- compatible statements


@pytest.mark.parametrize(
    "first, second",
    [
        ("I like museums.", "I also like parks."),
        ("My hotel budget is $200 per night.", "That's $1,400 for the week."),
        ("I'm in New York right now.", "I fly to London next week."),
    ],
)
def test_compatible_statements_are_forwarded_byte_identical(fake, start_proxy, first, second):
    proxy = start_proxy(clash_only("prefer_recent"))
    messages = [SYSTEM, {"role": "user", "content": first}, {"role": "assistant", "content": "Noted."},
                {"role": "user", "content": second}]
    _, actions = send(proxy, messages)
    assert not [a for a in actions if a.startswith("clash.")]
    assert forwarded(fake) == messages
    # byte for byte: the proxy forwards the client's own body when nothing was changed
    raw = json.dumps({"model": "gpt-4o", "messages": messages}, indent=1).encode()
    httpx.post(f"{proxy.url}/v1/chat/completions", content=raw, headers={"content-type": "application/json"})
    assert fake.received[-1].raw == raw


# ----------------------------------------------------------------------------- long conversation with tool calls


def long_conversation() -> list[dict]:
    messages: list[dict] = [SYSTEM, {"role": "user", "content": "We are 4 people. Please book us a trip to Lisbon."}]
    for i in range(12):
        call = {"id": f"call_{i}", "type": "function", "function": {"name": "search_hotels", "arguments": json.dumps({"page": i})}}
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{i}", "content": json.dumps({"hotels": [f"Hotel {i}A", f"Hotel {i}B"]})},
            {"role": "assistant", "content": f"Page {i}: two more options."},
            {"role": "user", "content": f"Show me page {i + 1}."},
        ]
    messages.append({"role": "user", "content": "Change of plan: we are 5 people now."})
    return messages


def test_clash_in_a_long_conversation_with_tool_calls_keeps_pairs_intact(fake, start_proxy):
    proxy = start_proxy(clash_only("prefer_recent"))
    messages = long_conversation()
    _, actions = send(proxy, messages)
    sent = forwarded(fake)
    assert "clash.resolve" in actions
    assert len(sent) == len(messages) and [m["role"] for m in sent] == [m["role"] for m in messages]
    assert sent[1]["content"] == "Please book us a trip to Lisbon."
    changed = [i for i, (a, b) in enumerate(zip(sent, messages)) if a != b]
    assert changed == [1]
    for i, m in enumerate(sent):
        if m["role"] == "tool":
            previous = next(p for p in reversed(sent[:i]) if p["role"] == "assistant")
            assert m["tool_call_id"] in [c["id"] for c in previous["tool_calls"]]
        if m.get("tool_calls"):
            answered = {t["tool_call_id"] for t in sent[i + 1:] if t["role"] == "tool"}
            assert {c["id"] for c in m["tool_calls"]} <= answered


# ----------------------------------------------------------------------------- metrics and memory


def test_a_clash_is_counted_once_per_session_and_reported_at_the_admin_route(fake, start_proxy, monkeypatch):
    monkeypatch.setenv("CTXWARDEN_ADMIN_KEY", "admin-test")
    proxy = start_proxy(clash_only("prefer_recent"))
    send(proxy, BUDGET_LUXURY, user="alice")
    send(proxy, [*BUDGET_LUXURY, {"role": "assistant", "content": "OK."}, {"role": "user", "content": "Thanks!"}], user="alice")
    telemetry = proxy.app.state.telemetry
    assert telemetry.value("ctxwarden.clash.detected", type="CONTRADICTORY_PREFERENCES") == 1
    assert telemetry.value("ctxwarden.clash.resolved", strategy="prefer_recent", by="auto") == 1
    assert forwarded(fake, 1)[:4] == forwarded(fake, 0)
    stats = httpx.get(f"{proxy.url}/admin/clash/stats", headers={"authorization": "Bearer admin-test"}).json()
    assert stats["contradictions"] == 1 and stats["auto_resolved"] == 1 and stats["auto_resolved_share"] == 1.0
    assert stats["by_type"] == {"CONTRADICTORY_PREFERENCES": 1}
    assert stats["resolution_strategies_used"] == {"prefer_recent": 1}


# ----------------------------------------------------------------------------- the LLM judge


def test_judge_model_finds_a_clash_the_rules_do_not_know(fake, start_proxy):
    fake.reply(content=json.dumps({"clashes": [{"older": "S1", "newer": "S3", "type": "CONTRADICTORY_PREFERENCES",
                                                "topic": "car colour", "older_value": "red", "newer_value": "blue"}]}))
    proxy = start_proxy(clash_only("prefer_recent", judge_model="judge-mini"))
    messages = [SYSTEM, {"role": "user", "content": "Paint the rental car red. Pick it up in Faro."},
                {"role": "assistant", "content": "Sure."}, {"role": "user", "content": "On reflection, paint it blue."}]
    _, actions = send(proxy, messages)
    judge_call, forwarded_call = fake.chat_requests
    assert judge_call["model"] == "judge-mini"
    assert judge_call["messages"][1]["content"] == (
        "S1 [new]: Paint the rental car red.\nS2 [new]: Pick it up in Faro.\nS3 [new]: On reflection, paint it blue."
    )
    assert forwarded_call["messages"][1]["content"] == "Pick it up in Faro."
    assert "clash.resolve" in actions
    # next turn: the judge only looks at the new message; the remembered finding keeps the prefix
    fake.reset()
    fake.reply(content='{"clashes": []}')
    turn2 = [*messages, {"role": "assistant", "content": "Blue it is."}, {"role": "user", "content": "Thanks."}]
    send(proxy, turn2)
    judge_call, forwarded_call = fake.chat_requests
    assert judge_call["messages"][1]["content"].endswith("S3: On reflection, paint it blue.\nS4 [new]: Thanks.")
    assert forwarded_call["messages"][:4] == [*messages[:1], {"role": "user", "content": "Pick it up in Faro."}, *messages[2:]]


def test_judge_failure_falls_back_to_the_local_detector_and_says_so(fake, start_proxy):
    fake.reply(status=500, json={"error": {"message": "boom"}})
    proxy = start_proxy(clash_only("prefer_recent", judge_model="judge-mini"))
    _, actions = send(proxy, BUDGET_LUXURY)
    assert {"clash.judge_failed", "clash.resolve"} <= set(actions)
    assert fake.chat_requests[-1]["messages"][1]["content"] == "I'm planning a trip to Paris in May."
