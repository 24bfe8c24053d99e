"""Unit tests of the history policy: the extractive summarizer, layouts by whole exchanges,
cache-stable summary blocks, trimming, pressure modes and the summarizer fallback."""

from __future__ import annotations

import asyncio
import json
import re
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from ctxwarden.policies.base import BudgetNote, Exchange, Services
from ctxwarden.policies.history.events import protected_from
from ctxwarden.policies.history.extractive import gist, summarize_messages
from ctxwarden.policies.history.layout import Body
from ctxwarden.policies.history.policy import HistoryConfig, HistoryPolicy
from ctxwarden.policies.messages import content_text
from ctxwarden.policies.text.tokens import TiktokenCounter
from ctxwarden.proxy.config import StorageConfig
from ctxwarden.proxy.storage import ChromaStore
from tests.test_compression_e2e import SYSTEM, agent_conversation, assert_pairs_intact, summaries


class RecordingMetrics:
    def __init__(self) -> None:
        self.added: list[tuple[str, float, dict]] = []

    def add(self, name: str, value: float = 1, **attrs: Any) -> None:
        self.added.append((name, value, attrs))

    def record(self, name: str, value: float, **attrs: Any) -> None:
        self.added.append((name, value, attrs))

    def gauge(self, name: str, value: float, **attrs: Any) -> None: ...


@pytest.fixture
def services(tmp_path) -> Services:
    return Services(tokens=TiktokenCounter(), metrics=RecordingMetrics(), store=ChromaStore(StorageConfig(path=str(tmp_path))))


def exchange(messages: list[dict], pressure: str = "none", target: int | None = None, tenant: str | None = None) -> Exchange:
    """`pressure` and `target` as the budget would set them: over its compress mark, down to `target`."""
    ex = Exchange("t", "gpt-4o", messages, None, {"model": "gpt-4o", "messages": messages}, tenant=tenant)
    ex.pressure, ex.target_tokens = pressure, target  # type: ignore[assignment]
    if pressure != "none" and target is not None:
        ex.notes.budget = BudgetNote(0, window=128_000, compress_at=target * 4 // 3, target_at=target, aggressive_at=target * 3 // 2)
    return ex


def run(policy: HistoryPolicy, ex: Exchange) -> Exchange:
    asyncio.run(policy.on_request(ex))
    return ex


def labels(ex: Exchange) -> list[str]:
    return ex.action_labels()


# ---------------------------------------------------------------------------- extractive summarizer


def test_extractive_summary_keeps_names_numbers_decisions_and_drops_filler():
    tokens = TiktokenCounter()
    verbose = "The provider notes that availability can vary by region and time of the request. " * 12
    span = [
        {"role": "user", "content": "Hi there! I'm Dana Whitfield. Our budget is $4,250 and I prefer aisle seats."},
        {"role": "assistant", "content": "Sure, happy to help! Let me look into that for you. I hope this helps."},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "search_flights", "arguments": "{\"to\": \"OSL\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": json.dumps(
            {"flights": [{"code": "SK4411", "price_eur": 312, "notes": verbose}], "source": "partner feed", "disclaimer": verbose})},
        {"role": "assistant", "content": "Great! Decision: we book SK4411 for 312 EUR on May 3. " + verbose},
    ]
    summary = summarize_messages(span)
    for fact in ("Dana Whitfield", "$4,250", "aisle seats", "SK4411", "312", "Decision: we book SK4411", "May 3", "search_flights"):
        assert fact in summary, fact
    for filler in ("happy to help", "I hope this helps", "availability can vary", "Hi there"):
        assert filler not in summary, filler
    ratio = sum(tokens.count_message(m, "gpt-4o") for m in span) / tokens.count_text(summary, "gpt-4o")
    assert ratio >= 3


def test_extractive_summary_reads_list_content_and_marks_images():
    span = [{"role": "user", "content": [
        {"type": "text", "text": "Here is the floor plan of Villa Serena, booked for 12 guests."},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
    ]}]
    summary = summarize_messages(span)
    assert "Villa Serena" in summary and "12 guests" in summary and "[image]" in summary
    assert "base64" not in summary


def test_capped_summary_prefers_what_people_said_over_tool_details():
    span = [{"role": "user", "content": "My name is Ola Nordmann and the deadline is June 9."}]
    for i in range(30):
        span += [
            {"role": "assistant", "content": None, "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": json.dumps({"id": f"ROW-{i:04d}", "amount": 100 + i})},
        ]
    capped = summarize_messages(span, max_tokens=40)
    assert "Ola Nordmann" in capped and "June 9" in capped
    assert len(capped) < len(summarize_messages(span)) / 4


def test_gist_is_a_single_short_line():
    text = json.dumps({"results": [{"id": i, "name": f"Item {i}"} for i in range(12)], "total": 12}) + "\n\nmore"
    line = gist(text, 160)
    assert "\n" not in line and len(line) <= 160 and "results" in line and "12 items" in line


# ---------------------------------------------------------------------------- layout


def test_protected_tail_is_made_of_whole_exchanges():
    msgs = agent_conversation(30)
    body = Body.build(msgs[1:], lambda m, k: 1, [None] * (len(msgs) - 1))
    units = body.plan_units()
    for keep in range(0, 12):
        tail = protected_from(units, len(body.units), keep)
        first = body.units[tail][0] if tail < len(body.units) else len(body.messages)
        assert first <= len(body.messages) - keep  # at least `keep` messages verbatim
        assert body.messages[first]["role"] != "tool" if first < len(body.messages) else True  # never half an exchange


@pytest.mark.parametrize("n", [22, 31, 37, 44, 58])
def test_layouts_keep_system_first_pairs_intact_and_the_tail_verbatim(services, n):
    policy = HistoryPolicy(HistoryConfig(keep_recent=5, max_messages=10, event_min_exchanges=4), services)
    conv = agent_conversation(n)
    ex = run(policy, exchange(conv))
    assert ex.messages[0] is conv[0]
    assert ex.messages[-5:] == conv[-5:]
    assert summaries(ex.messages) and "history.summarize" in labels(ex)
    assert_pairs_intact(ex.messages)
    assert ex.messages[0] == SYSTEM and conv == agent_conversation(n)  # the client's list and dicts untouched


def test_a_growing_conversation_keeps_its_prefix_and_appends_new_blocks(services):
    policy = HistoryPolicy(HistoryConfig(max_messages=12, keep_recent=4, event_min_exchanges=6, max_summaries=50), services)
    conv = agent_conversation(24)
    previous: list[dict] = []
    appended = 0
    for turn in range(25):
        ex = run(policy, exchange(conv))
        blocks = summaries(ex.messages)
        if previous:
            assert blocks[: len(previous)] == previous, f"turn {turn}: an earlier block changed"
            appended += len(blocks) - len(previous)
        previous = blocks
        assert_pairs_intact(ex.messages)
        conv = conv + [{"role": "assistant", "content": f"Answer {turn}: {turn * 11} EUR."}, {"role": "user", "content": f"Question {turn}?"}]
    assert appended >= 3


def test_too_many_blocks_are_merged_into_one(services):
    policy = HistoryPolicy(HistoryConfig(max_messages=10, keep_recent=2, event_min_exchanges=3, max_summaries=2), services)
    conv = agent_conversation(12)
    merged = False
    for turn in range(20):
        ex = run(policy, exchange(conv))
        assert len(summaries(ex.messages)) <= 2
        merged |= "history.merge" in labels(ex)
        conv = conv + [{"role": "assistant", "content": f"Answer {turn}."}, {"role": "user", "content": f"Question {turn}?"}]
    assert merged
    assert "Priya Raman" in summaries(ex.messages)[0]["content"]  # the oldest facts survive the merge


def test_untouched_when_neither_distracted_nor_under_pressure(services):
    conv = agent_conversation(12)
    ex = run(HistoryPolicy(HistoryConfig(), services), exchange(conv))
    assert ex.messages is conv and ex.actions == []


def test_distraction_severity(services):
    policy = HistoryPolicy(HistoryConfig(max_messages=20, max_tokens=100_000), services)
    medium = run(policy, exchange(agent_conversation(26)))
    high = run(policy, exchange(agent_conversation(50)))
    assert medium.actions[0].label == "history.distraction" and medium.actions[0].detail["severity"] == "MEDIUM"
    assert high.actions[0].detail["severity"] == "HIGH"
    assert ("ctxwarden.history.distraction", 1, {"severity": "HIGH"}) in services.metrics.added


# ---------------------------------------------------------------------------- trimming and pressure


def test_units_older_than_max_age_are_trimmed_from_message_timestamps(services):
    conv = agent_conversation(30)
    now = datetime.now(timezone.utc)
    stamped = [dict(m, timestamp=(now - timedelta(hours=3 if i < 12 else 0)).isoformat()) for i, m in enumerate(conv)]
    ex = run(HistoryPolicy(HistoryConfig(max_age_s=3600), services), exchange(stamped))
    trim = next(a for a in ex.actions if a.label == "history.trim")
    assert trim.detail["messages"] >= 10
    assert stamped[1] not in ex.messages and "Priya Raman" not in json.dumps(ex.messages)
    assert ex.messages[0] is stamped[0]
    assert_pairs_intact(ex.messages)


def test_no_timestamps_means_no_trimming(services):
    ex = run(HistoryPolicy(HistoryConfig(max_age_s=1), services), exchange(agent_conversation(30)))
    assert "history.trim" not in labels(ex)


def test_a_budget_event_that_cannot_reach_its_target_keeps_only_summaries_and_the_current_turn(services):
    conv = agent_conversation(30)
    conv = conv + [{"role": "assistant", "content": None, "tool_calls": [{"id": "now", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                   {"role": "tool", "tool_call_id": "now", "content": "current result"}]
    ex = run(HistoryPolicy(HistoryConfig(max_messages=1000, max_tokens=10**6), services), exchange(conv, "aggressive", target=10))
    assert ex.messages[-2:] == conv[-2:]  # the current exchange; the current user message carries the summaries
    current = ex.messages[-3]
    assert current["role"] == "user" and current["content"].endswith("\n\n" + conv[-3]["content"])  # the words, whole
    assert summaries([current]) and not summaries([{"content": conv[-3]["content"]}])
    assert ex.messages[0] is conv[0] and len(ex.messages) == 4  # system, summaries in the user turn, the exchange
    assert_pairs_intact(ex.messages)


def test_a_budget_event_compacts_down_to_the_target(services):
    conv = agent_conversation(60, result_words=120)
    counter = services.tokens
    before = counter.count_messages(conv, "gpt-4o")
    target = int(before * 0.3)
    ex = run(HistoryPolicy(HistoryConfig(archive_spans=False, max_messages=1000, max_tokens=10**6), services),
             exchange(conv, "compress", target=target))
    assert counter.count_messages(ex.messages, "gpt-4o") <= target * 4 // 3  # under the compress mark
    assert ex.notes.history["events"] >= 1  # replayed: the events earlier requests would have fired
    assert "Priya Raman" in summaries(ex.messages)[0]["content"]
    # a fresh policy (a restart, another replica) derives the same layout from the content alone
    fresh = run(HistoryPolicy(HistoryConfig(archive_spans=False, max_messages=1000, max_tokens=10**6), services),
                exchange(conv, "compress", target=target))
    assert fresh.messages == ex.messages  # the same plan, whichever replica computes it


# ---------------------------------------------------------------------------- summarizer


def llm_services(services: Services, outcomes: list) -> tuple[Services, list]:
    calls: list = []

    async def complete(model, messages, exchange=None, **kwargs):
        calls.append((model, messages))
        outcome = outcomes.pop(0) if outcomes else "- summary"
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    return Services(tokens=services.tokens, metrics=services.metrics, store=services.store, complete=complete), calls


def test_a_fallback_summary_is_retried_with_the_llm_later(services):
    svc, calls = llm_services(services, [RuntimeError("upstream 503"), "- LLM summary: Priya Raman, $12,500"])
    policy = HistoryPolicy(HistoryConfig(summarizer_model="mini", fallback_retry_s=0), svc)
    conv = agent_conversation(40)
    first = run(policy, exchange(conv))
    assert "history.summarizer_fallback" in labels(first)
    assert "Priya Raman" in summaries(first.messages)[0]["content"]  # extractive
    second = run(policy, exchange(conv + [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "next?"}]))
    assert "LLM summary" in summaries(second.messages)[0]["content"]
    assert len(calls) == 2 and calls[0][0] == "mini"
    third = run(policy, exchange(conv + [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "next?"}]))
    assert len(calls) == 2 and summaries(third.messages) == summaries(second.messages)


def test_summaries_are_not_shared_between_tenants(services):
    svc, calls = llm_services(services, [])
    policy = HistoryPolicy(HistoryConfig(summarizer_model="mini"), svc)
    conv = agent_conversation(40)
    a = run(policy, exchange(conv, tenant="a"))
    b = run(policy, exchange(conv, tenant="b"))
    run(policy, exchange(conv, tenant="a"))
    assert len(calls) == 2
    ref_a = summaries(a.messages)[0]["content"].split("ref=")[1].split(" ")[0]
    ref_b = summaries(b.messages)[0]["content"].split("ref=")[1].split(" ")[0]
    assert ref_a != ref_b


def test_without_a_store_summaries_carry_no_ref_and_no_recall_tool(services):
    svc = Services(tokens=services.tokens, metrics=services.metrics)
    ex = run(HistoryPolicy(HistoryConfig(), svc), exchange(agent_conversation(40)))
    assert summaries(ex.messages) and "ref=" not in summaries(ex.messages)[0]["content"]
    assert ex.proxy_tools == {}


def test_with_a_store_the_summarized_span_is_recallable(services):
    ex = run(HistoryPolicy(HistoryConfig(), services), exchange(agent_conversation(40)))
    block = summaries(ex.messages)[0]["content"]
    span_ref, result_ref = re.findall(r"ref=(hs_\w+)", block)[0], re.findall(r"ref=(ar_\w+)", block)[0]
    tool = ex.proxy_tools["context_recall"]
    text = asyncio.run(tool.handler(ex, json.dumps({"ref": span_ref})))
    assert "Priya Raman" in text and "call_0_a" not in text and "search_flights" in text
    result = asyncio.run(tool.handler(ex, json.dumps({"ref": result_ref})))
    assert result in [content_text(m) for m in agent_conversation(40) if m["role"] == "tool"]


def test_concurrent_requests_for_the_same_span_make_one_summary(services):
    svc, calls = llm_services(services, [])

    async def slow_complete(model, messages, exchange=None, **kwargs):
        calls.append(model)
        await asyncio.sleep(0.05)
        return "- one summary"

    svc.complete = slow_complete
    policy = HistoryPolicy(HistoryConfig(summarizer_model="mini"), svc)
    conv = agent_conversation(40)

    async def both() -> list[Exchange]:
        exs = [exchange(conv), exchange(conv)]
        await asyncio.gather(*(policy.on_request(ex) for ex in exs))
        return exs

    a, b = asyncio.run(both())
    assert len(calls) == 1 and summaries(a.messages) == summaries(b.messages)


def test_a_developer_system_prompt_stays_the_only_instruction_and_summaries_go_to_a_user_turn(services):
    conv = [{"role": "developer", "content": "Be brief."}] + agent_conversation(40)[1:]
    ex = run(HistoryPolicy(HistoryConfig(), services), exchange(conv))
    assert ex.messages[0] is conv[0] and all(m["role"] not in ("system", "developer") for m in ex.messages[1:])
    assert ex.messages[1]["role"] == "user" and ex.messages[1]["content"].startswith("[ctxwarden: summary of")


def test_summarized_images_are_marked_and_counted(services):
    conv = agent_conversation(40)
    conv[1] = {"role": "user", "content": [{"type": "text", "text": "Here is my passport, Priya Raman."},
                                           {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}
    ex = run(HistoryPolicy(HistoryConfig(), services), exchange(conv))
    assert "[image]" in summaries(ex.messages)[0]["content"] and "base64" not in json.dumps(ex.messages)
    assert next(a for a in ex.actions if a.label == "history.summarize").detail["non_text_parts"] == 1
