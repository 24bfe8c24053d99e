"""End to end: the history and archive policies through the real proxy, the official SDK and a
local fake upstream (what the upstream received is what we assert on)."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest

from ctxwarden.policies.history.blocks import summary_sections
from ctxwarden.policies.history.scratchpad import archive_ref
from ctxwarden.policies.text.tokens import TiktokenCounter
from tests.conftest import openai_client, policies_off

SYSTEM = {"role": "system", "content": "You are a travel agent for Northwind. Always quote prices in EUR."}
SUMMARIZER = "summarizer-mini"


def agent_conversation(n_messages: int, result_words: int = 40) -> list[dict[str, Any]]:
    """A system prompt, early facts, then turns with sequential and parallel tool calls; ends on a user message."""
    msgs: list[dict[str, Any]] = [
        SYSTEM,
        {"role": "user", "content": "Hi, I'm Priya Raman from Contoso. Our budget is $12,500 and we fly on March 14."},
        {"role": "assistant", "content": "Thanks Priya. Decision: we book with FlightTool and cap hotels at $180 a night."},
    ]
    turn = 0
    filler = " ".join(["The provider notes that availability can vary by region and time."] * (result_words // 10))
    while len(msgs) < n_messages - 1:
        msgs.append({"role": "user", "content": f"Check option {turn} for Lisbon, please."})
        ids = [f"call_{turn}_a", f"call_{turn}_b"]
        if turn % 2 == 0:  # parallel calls
            msgs.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": ids[0], "type": "function", "function": {"name": "search_flights", "arguments": json.dumps({"to": "LIS", "option": turn})}},
                {"id": ids[1], "type": "function", "function": {"name": "search_hotels", "arguments": json.dumps({"city": "Lisbon"})}},
            ]})
            msgs.append({"role": "tool", "tool_call_id": ids[0], "content": json.dumps({"flight": f"TP{100 + turn}", "price_eur": 400 + turn, "notes": filler})})
            msgs.append({"role": "tool", "tool_call_id": ids[1], "content": f"Hotel Avenida has rooms at {150 + turn} EUR. {filler}"})
        else:  # sequential calls
            for i, name in enumerate(("search_flights", "search_hotels")):
                msgs.append({"role": "assistant", "content": None, "tool_calls": [
                    {"id": ids[i], "type": "function", "function": {"name": name, "arguments": json.dumps({"option": turn})}}]})
                msgs.append({"role": "tool", "tool_call_id": ids[i], "content": f"{name} option {turn}: {300 + turn} EUR. {filler}"})
        msgs.append({"role": "assistant", "content": f"Option {turn}: flight TP{100 + turn} at {400 + turn} EUR."})
        turn += 1
    msgs.append({"role": "user", "content": "Which option is the cheapest overall?"})
    return msgs


def assert_pairs_intact(messages: list[dict[str, Any]]) -> None:
    """Every tool message answers a call of the closest preceding assistant; every call is answered."""
    pending: set[str] = set()
    for msg in messages:
        if msg["role"] == "tool":
            assert msg["tool_call_id"] in pending, f"orphan tool message {msg['tool_call_id']}"
            pending.discard(msg["tool_call_id"])
            continue
        assert not pending, f"unanswered tool calls {pending}"
        if msg["role"] == "assistant" and msg.get("tool_calls"):
            pending = {c["id"] for c in msg["tool_calls"]}
    assert not pending


def request_tokens(body: dict[str, Any]) -> int:
    counter = TiktokenCounter()
    return counter.count_messages(body["messages"], body["model"]) + counter.count_tools(body.get("tools"), body["model"])


def window_for(messages: list[dict[str, Any]], usage: float) -> int:
    return int(TiktokenCounter().count_messages(messages, "gpt-4o") / usage)


def main_requests(fake) -> list[dict[str, Any]]:
    return [r for r in fake.chat_requests if r["model"] != SUMMARIZER]


def summarizer_requests(fake) -> list[dict[str, Any]]:
    return [r for r in fake.chat_requests if r["model"] == SUMMARIZER]


def summaries(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The proxy's summaries in forwarded messages (in user turns: alone, or inside a user's message),
    each as {"role": the message's role, "content": the summary's text}."""
    return [{"role": m.get("role"), "content": text} for m in messages for text in summary_sections(m)]


# ---------------------------------------------------------------------------- compression


@pytest.mark.parametrize("usage,pressure", [(0.87, "compress"), (0.92, "aggressive")])
def test_long_agent_conversation_is_forwarded_valid_and_under_target(fake, start_proxy, usage, pressure):
    conv = agent_conversation(60)
    window = window_for(conv, usage)
    proxy = start_proxy({"models": {"gpt-4o": {"context_window": window}}, "policies": policies_off("history", "archive")})
    raw = openai_client(proxy).chat.completions.with_raw_response.create(model="gpt-4o", messages=conv)
    assert raw.parse().choices[0].message.content == "You said: Which option is the cheapest overall?"
    actions = raw.headers["x-ctxwarden-actions"].split(",")
    assert f"budget.{pressure}" in actions and "history.summarize" in actions
    sent = fake.chat_requests[-1]
    forwarded = sent["messages"]
    assert forwarded[0] == SYSTEM
    assert_pairs_intact(forwarded)
    # Events are replayed at every boundary where a request could have ended: the last one brought the
    # history down to the target, and it has grown less than the hysteresis band since.
    assert request_tokens(sent) <= int(0.85 * window)  # the compress mark
    assert summaries(forwarded), "the oldest span became a summary"
    assert "Priya Raman" in summaries(forwarded)[0]["content"] and "$12,500" in summaries(forwarded)[0]["content"]
    assert forwarded[-1] == conv[-1]


def test_next_turns_reuse_the_summary_and_forward_an_identical_prefix(fake, start_proxy):
    proxy = start_proxy({"policies": {**policies_off("history"), "history": {
        "enabled": True, "summarizer_model": SUMMARIZER, "max_messages": 20, "keep_recent": 6, "event_min_exchanges": 8}}})
    client = openai_client(proxy)
    conv = agent_conversation(60)
    fake.reply(content="- Priya Raman (Contoso), budget $12,500, flies March 14; book with FlightTool.")
    first = client.chat.completions.create(model="gpt-4o", messages=conv).choices[0].message.content
    turn1 = main_requests(fake)[-1]["messages"]
    calls = len(summarizer_requests(fake))
    assert calls == len(summaries(turn1)) >= 1  # one call per block the replayed events made
    summary_call = summarizer_requests(fake)[0]
    assert "Priya Raman" in summary_call["messages"][-1]["content"]  # the span's transcript went to the summarizer
    assert turn1[0] == SYSTEM and "flies March 14; book with FlightTool." in summaries(turn1)[0]["content"]
    assert turn1[-6:] == conv[-6:]

    conv = conv + [{"role": "assistant", "content": first}, {"role": "user", "content": "And the cheapest hotel?"}]
    client.chat.completions.create(model="gpt-4o", messages=conv)
    assert len(summarizer_requests(fake)) == calls, "the next turn reuses the cached summaries"
    turn2 = main_requests(fake)[-1]["messages"]
    assert turn2[: len(turn1)] == turn1, "the previous forwarded request is a prefix of this one"

    # Grow the conversation until the verbatim tail outgrows its budget: one new block, appended.
    for i in range(12):
        conv = conv + [{"role": "assistant", "content": f"Answer {i}."}, {"role": "user", "content": f"Question {i}?"}]
        client.chat.completions.create(model="gpt-4o", messages=conv)
        if len(summarizer_requests(fake)) > calls:
            break
    assert len(summarizer_requests(fake)) == calls + 1
    later = main_requests(fake)[-1]["messages"]
    assert later[0] == SYSTEM and summaries(later)[:calls] == summaries(turn1), "the earlier summary blocks are unchanged"
    # the new block joins the user turn that holds the earlier ones, after them: the prompt's bytes
    # up to the end of the earlier summaries are the same (the provider's cached prefix holds)
    frozen = turn1[1]["content"][: turn1[1]["content"].rindex(summaries(turn1)[-1]["content"]) + len(summaries(turn1)[-1]["content"])]
    assert later[1]["role"] == turn1[1]["role"] == "user" and later[1]["content"].startswith(frozen)
    assert len(summaries(later)) == calls + 1
    assert later[-6:] == conv[-6:]
    assert_pairs_intact(later)


@pytest.mark.parametrize("failure", [{"status": 500, "json": {"error": {"message": "down", "type": "server_error"}}},
                                     {"delay_s": 1.5, "content": "too late"}])
def test_summarizer_down_falls_back_to_the_extractive_summary(fake, start_proxy, failure):
    proxy = start_proxy({"policies": {**policies_off("history"), "history": {
        "enabled": True, "summarizer_model": SUMMARIZER, "summarizer_timeout_s": 0.5}}})
    fake.reply(**failure)
    fake.reply(content="final answer")
    conv = agent_conversation(40)
    raw = openai_client(proxy).chat.completions.with_raw_response.create(model="gpt-4o", messages=conv)
    assert raw.parse().choices[0].message.content == "final answer"
    assert "history.summarizer_fallback" in raw.headers["x-ctxwarden-actions"].split(",")
    sent = main_requests(fake)[-1]["messages"]
    summary = summaries(sent)[0]["content"]
    assert "Priya Raman" in summary and "$12,500" in summary and "FlightTool" in summary  # extractive kept the facts
    assert "too late" not in summary
    assert_pairs_intact(sent)


def test_nothing_to_compress_is_forwarded_byte_identical(fake, start_proxy):
    proxy = start_proxy({"policies": policies_off("history", "archive")})
    sent: list[bytes] = []
    http = httpx.Client(event_hooks={"request": [lambda r: sent.append(r.read())]})
    client = openai_client(proxy, http_client=http)
    conv = agent_conversation(12)
    raw = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=conv, temperature=0.3)
    assert raw.headers["x-ctxwarden-actions"] == ""
    assert fake.received[-1].raw == sent[-1]
    assert "tools" not in fake.chat_requests[-1]


def test_messages_older_than_max_age_are_trimmed_when_the_client_sends_timestamps(fake, start_proxy):
    proxy = start_proxy({"policies": {**policies_off("history"), "history": {"enabled": True, "max_age_s": 3600}}})
    conv = agent_conversation(30)
    now = time.time()
    stamps = [now - 7200 if i < 15 else now - 60 for i in range(len(conv))]  # the first half is two hours old
    raw = openai_client(proxy).chat.completions.with_raw_response.create(
        model="gpt-4o", messages=conv, extra_headers={"x-ctxwarden-timestamps": json.dumps(stamps)})
    actions = raw.headers["x-ctxwarden-actions"].split(",")
    assert "history.distraction" in actions and "history.trim" in actions
    forwarded = fake.chat_requests[-1]["messages"]
    assert forwarded[0] == SYSTEM
    assert conv[1] not in forwarded and "Priya Raman" not in json.dumps(forwarded)  # trimmed, not summarized
    assert_pairs_intact(forwarded)
    assert forwarded[-6:] == conv[-6:]


# ---------------------------------------------------------------------------- archive + recall


REPORT = "Quarterly ledger LEDGER-7731. " + " ".join(f"Line {i}: invoice INV-{1000 + i} settled for {i * 37} EUR." for i in range(120)) + " Grand total 48,213.55 EUR."


def archived_conversation(call_id: str = "call_report") -> list[dict[str, Any]]:
    return [
        SYSTEM,
        {"role": "user", "content": "Pull the quarterly ledger."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": "get_ledger", "arguments": "{\"quarter\": \"Q3\"}"}}]},
        {"role": "tool", "tool_call_id": call_id, "content": REPORT},
        {"role": "assistant", "content": "I have the ledger for Q3."},
        {"role": "user", "content": "What was the exact grand total?"},
    ]


def archive_on(**archive: Any) -> dict[str, Any]:
    """Only the archive on, with a window the ledger conversation overfills (budget pressure)."""
    return {"models": {"gpt-4o": {"context_window": window_for(archived_conversation(), 0.87)}},
            "policies": {**policies_off("archive"), "archive": {"enabled": True, **archive}}}


def stream_text(stream) -> str:
    return "".join(c.choices[0].delta.content or "" for c in stream if c.choices)


@pytest.mark.parametrize("stream", [False, True])
def test_archive_and_recall_round_trip(fake, start_proxy, stream):
    proxy = start_proxy(archive_on())
    ref = archive_ref(REPORT, "call_report")
    fake.reply(tool_calls=[{"name": "context_recall", "arguments": json.dumps({"ref": ref})}])
    fake.reply(content="The grand total was 48,213.55 EUR.")
    client = openai_client(proxy)
    if stream:
        text = stream_text(client.chat.completions.create(model="gpt-4o", messages=archived_conversation(), stream=True))
    else:
        message = client.chat.completions.create(model="gpt-4o", messages=archived_conversation()).choices[0].message
        assert not message.tool_calls
        text = message.content
    assert text == "The grand total was 48,213.55 EUR."
    first, second = fake.chat_requests
    stub = first["messages"][3]
    assert stub["tool_call_id"] == "call_report" and f"ref={ref}" in stub["content"] and "48,213.55" not in stub["content"]
    assert [t["function"]["name"] for t in first["tools"]] == ["context_recall"]
    recall_call, recall_answer = second["messages"][-2:]
    assert recall_call["tool_calls"][0]["function"]["name"] == "context_recall"
    assert recall_answer == {"role": "tool", "tool_call_id": recall_call["tool_calls"][0]["id"], "content": REPORT}
    metrics = httpx.get(f"{proxy.url}/metrics").text
    for name in ("ctxwarden_scratchpad_writes", "ctxwarden_scratchpad_reads", "ctxwarden_compression_triggered",
                 "ctxwarden_compression_freed_tokens", "ctxwarden_compression_ratio", "ctxwarden_compression_duration_seconds"):
        assert name in metrics, name


PAGE = "Contents of https://example.org/news:\n" + " ".join(
    [f"* [Section {i}](/news/section-{i})" for i in range(110)] + ["confirmation code for reference REF-298115: E08-MYGW"]
    + [f"* [Section {i}](/news/section-{i})" for i in range(110, 300)])


def test_recall_by_query_shows_the_part_of_a_long_chunk_that_names_the_id(fake, start_proxy):
    # A fetched page has no sentence ends, so its chunks are 2,000 characters; the line asked about
    # sits past the first 1,200 a hit shows. The hit must show that line, not the chunk's head.
    conversation = archived_conversation()
    conversation[3] = {**conversation[3], "content": PAGE}
    conversation[-1] = {"role": "user", "content": "What is the confirmation code for reference REF-298115?"}
    proxy = start_proxy({"models": {"gpt-4o": {"context_window": window_for(conversation, 0.87)}},
                         "policies": {**policies_off("archive"), "archive": {"enabled": True}}})
    fake.reply(tool_calls=[{"name": "context_recall", "arguments": json.dumps({"query": "confirmation code REF-298115"})}])
    fake.reply(content="E08-MYGW")
    openai_client(proxy).chat.completions.create(model="gpt-4o", messages=conversation)
    first, second = fake.chat_requests
    assert "E08-MYGW" not in first["messages"][3]["content"]  # archived behind a stub
    answer = second["messages"][-1]["content"]
    assert "REF-298115: E08-MYGW" in answer and answer.count("\n") >= 1


@pytest.mark.parametrize("stream", [False, True])
def test_recall_of_unknown_and_foreign_refs_answers_an_error_text(fake, start_proxy, stream):
    proxy = start_proxy(archive_on())
    client = openai_client(proxy)
    foreign = archive_ref(REPORT, "call_report")
    fake.reply(content="ok")
    client.chat.completions.create(model="gpt-4o", messages=archived_conversation(), extra_headers={"x-ctxwarden-tenant": "acme"})
    # Tenant "globex" has its own archived result; its model asks for acme's ref and an unknown one, in one turn.
    own = archived_conversation("call_globex")
    own[3] = {**own[3], "content": REPORT.replace("LEDGER-7731", "LEDGER-0042")}
    fake.reply(tool_calls=[{"name": "context_recall", "arguments": json.dumps({"ref": foreign})},
                           {"name": "context_recall", "arguments": json.dumps({"ref": "ar_doesnotexist0000"})}])
    fake.reply(content="Sorry, I cannot see that ledger.")
    globex = {"x-ctxwarden-tenant": "globex"}
    if stream:
        text = stream_text(client.chat.completions.create(model="gpt-4o", messages=own, extra_headers=globex, stream=True))
    else:
        raw = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=own, extra_headers=globex)
        text = raw.parse().choices[0].message.content
        assert "archive.recall_unknown" in raw.headers["x-ctxwarden-actions"].split(",")
    assert text == "Sorry, I cannot see that ledger."
    assert len(fake.chat_requests) == 3
    answers = [m for m in fake.chat_requests[-1]["messages"] if m["role"] == "tool"][-2:]
    assert all(a["content"].startswith("error: nothing is archived under ref=") for a in answers)
    assert "LEDGER-7731" not in json.dumps(fake.chat_requests[-1])


def test_summarized_history_is_recallable_by_its_ref(fake, start_proxy):
    proxy = start_proxy({"policies": policies_off("history", "archive")})
    conv = agent_conversation(40)
    fake.reply(content="first")
    openai_client(proxy).chat.completions.create(model="gpt-4o", messages=conv)
    summary = summaries(fake.chat_requests[-1]["messages"])[0]["content"]
    ref = summary.split("ref=")[1].split(" ")[0]
    assert ref.startswith("hs_") and [t["function"]["name"] for t in fake.chat_requests[-1]["tools"]] == ["context_recall"]
    fake.reply(tool_calls=[{"name": "context_recall", "arguments": json.dumps({"ref": ref})}])
    fake.reply(content="You fly on March 14.")
    answer = openai_client(proxy).chat.completions.create(model="gpt-4o", messages=conv + [
        {"role": "assistant", "content": "first"}, {"role": "user", "content": "When do I fly, exactly?"}])
    assert answer.choices[0].message.content == "You fly on March 14."
    transcript = fake.chat_requests[-1]["messages"][-1]["content"]
    assert conv[1]["content"] in transcript and conv[2]["content"] in transcript  # the exact early messages
    # tool results are archived one by one, each behind the ref its digest line shows
    result_ref = summary.split("→ ref=")[1].split(":")[0]
    fake.reply(tool_calls=[{"name": "context_recall", "arguments": json.dumps({"ref": result_ref})}])
    fake.reply(content="ok")
    openai_client(proxy).chat.completions.create(model="gpt-4o", messages=conv + [
        {"role": "assistant", "content": "first"}, {"role": "user", "content": "Show the first search result."}])
    assert fake.chat_requests[-1]["messages"][-1]["content"] == conv[5]["content"]


@pytest.mark.parametrize("stream", [False, True])
def test_recall_rounds_are_bounded(fake, start_proxy, stream):
    proxy = start_proxy(archive_on(max_recall_rounds=2))
    ref = archive_ref(REPORT, "call_report")
    for _ in range(4):
        fake.reply(tool_calls=[{"name": "context_recall", "arguments": json.dumps({"ref": ref})}])
    client = openai_client(proxy)
    if stream:
        chunks = [c for c in client.chat.completions.create(model="gpt-4o", messages=archived_conversation(), stream=True) if c.choices]
        assert not any(c.choices[0].delta.tool_calls for c in chunks)
        finish = [c.choices[0].finish_reason for c in chunks if c.choices[0].finish_reason]
    else:
        raw = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=archived_conversation())
        assert "archive.recall_dropped" in raw.headers["x-ctxwarden-actions"].split(",")
        choice = raw.parse().choices[0]
        assert not choice.message.tool_calls
        finish = [choice.finish_reason]
    assert finish == ["stop"]  # no tool call is announced that the client never receives
    assert len(fake.chat_requests) == 3  # the first call and two recall rounds, then the proxy stops


def test_a_tight_window_agent_loop_changes_its_prefix_only_at_compaction_events(fake, start_proxy):
    """An agent loop in a window that fills every few steps (default policies as a new user gets
    them): between the history policy's events every forwarded request starts with the previous
    one (nothing is stubbed while the history grows from the target to the compress mark), the
    result the model just asked for is forwarded verbatim on every step, and nothing passes the window."""
    window = 12_000
    proxy = start_proxy({"models": {"gpt-4o": {"context_window": window}}})
    tools = [{"type": "function", "function": {"name": name, "description": f"Read {name} records by query.",
                                               "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}
             for name in ("orders", "logs", "runbooks")]
    history: list[dict[str, Any]] = [SYSTEM, {"role": "user", "content": "Find why checkouts failed last week."}]
    previous = None
    breaks = events = 0
    with httpx.Client(base_url=f"{proxy.url}/v1", timeout=60, headers={"x-ctxwarden-session": "tight-loop"}) as client:
        for step in range(28):
            call_id = f"call_{step}"
            history.append({"role": "assistant", "content": None, "tool_calls": [{"id": call_id, "type": "function", "function": {
                "name": tools[step % 3]["function"]["name"], "arguments": json.dumps({"q": f"step {step}"})}}]})
            rows = 25 + (step * 37) % 60  # ~400-1,500 tokens
            result = " ".join(f"Record {step}-{i}: order ORD-{step:03d}{i:03d} failed at gateway {i % 7} with code "
                              f"E{(step * i) % 97:02d} after {i * 3} ms." for i in range(rows))
            history.append({"role": "tool", "tool_call_id": call_id, "content": result})
            response = client.post("/chat/completions", json={"model": "gpt-4o", "messages": history, "tools": tools})
            assert response.status_code == 200, response.text
            sent = fake.chat_requests[-1]
            assert sent["messages"][-1] == {"role": "tool", "tool_call_id": call_id, "content": result}
            assert request_tokens(sent) <= window
            assert_pairs_intact(sent["messages"])
            event = "history.compaction" in response.headers.get("x-ctxwarden-actions", "")
            events += event
            if previous is not None:
                extends = sent["messages"][: len(previous["messages"])] == previous["messages"] and sent.get("tools") == previous.get("tools")
                breaks += not extends
                assert extends or event, f"step {step}: the prefix changed without a compaction event"
            previous = sent
    assert events >= 2, "the window is tight enough for several events"
    assert breaks <= events
