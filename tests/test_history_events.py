"""Compaction events: derived from content, rare, frozen, and the same bytes on a replay.

An agent loop is driven step by step through the history policy, as the proxy would see it
(the client resends its whole raw history every step). The forwarded messages of each step must
start with the previous step's forwarded messages, except at compaction events; an event must
leave every earlier block untouched; and a fresh policy (a restart, another replica) given the
same history must forward the same bytes."""

from __future__ import annotations

import asyncio
import json
import random

import pytest

from ctxwarden.policies.base import BudgetNote, Exchange, Services
from ctxwarden.policies.history.blocks import summary_sections
from ctxwarden.policies.history.events import Marks, Units, plan
from ctxwarden.policies.history.policy import HistoryConfig, HistoryPolicy
from ctxwarden.policies.history.scratchpad import refs_in
from ctxwarden.policies.text.tokens import TiktokenCounter
from ctxwarden.proxy.config import StorageConfig
from ctxwarden.proxy.storage import ChromaStore
from tests.test_compression_e2e import assert_pairs_intact
from tests.test_history_units import RecordingMetrics

SYSTEM = {"role": "system", "content": "You are an operations agent."}


@pytest.fixture
def services(tmp_path) -> Services:
    return Services(tokens=TiktokenCounter(), metrics=RecordingMetrics(), store=ChromaStore(StorageConfig(path=str(tmp_path))))
TASK = {"role": "user", "content": "Find why checkouts failed last week and report the order ids involved."}


def tool_result(rng: random.Random, step: int) -> str:
    """A JSON search result of 40-120 records; record 17 of step 5 holds a planted id."""
    records = [{"id": f"ORD-{rng.randint(100000, 999999)}", "status": rng.choice(["shipped", "pending", "failed"]),
                "amount": round(rng.uniform(5, 900), 2)} for _ in range(rng.randint(40, 120))]
    if step == 5:
        records[17] = {"id": "ORD-471147", "status": "failed", "amount": 12.5, "tracking": "ZX9-KD41"}
    return json.dumps({"total": len(records), "results": records})


def agent_loop(steps: int, seed: int = 3) -> list[list[dict]]:
    """The raw history the client sends at each step (system, task, then call/result pairs)."""
    rng = random.Random(seed)
    history = [SYSTEM, TASK]
    sent = []
    for step in range(steps):
        sent.append(list(history))
        call = {"id": f"call_{step}", "type": "function", "function": {"name": "search_orders", "arguments": json.dumps({"page": step})}}
        history = history + [{"role": "assistant", "content": f"Checking page {step}.", "tool_calls": [call]},
                             {"role": "tool", "tool_call_id": f"call_{step}", "content": tool_result(rng, step)}]
    return sent


def forward(policy: HistoryPolicy, messages: list[dict], window: int | None = None) -> Exchange:
    ex = Exchange("t", "gpt-4o", messages, None, {"model": "gpt-4o", "messages": messages}, tenant="acme", session_id="s1")
    if window:
        ex.notes.budget = BudgetNote(0, window=window, compress_at=int(0.8 * window), target_at=int(0.6 * window))
    asyncio.run(policy.on_request(ex))
    return ex


CONFIG = dict(max_messages=20, max_tokens=2000, keep_recent=6, event_min_exchanges=8, event_min_tokens=10**9)


def test_an_agent_loop_keeps_its_prefix_between_rare_events(services):
    policy = HistoryPolicy(HistoryConfig(**CONFIG), services)
    previous: list[dict] | None = None
    events = kept = 0
    for sent in agent_loop(40):
        ex = forward(policy, sent)
        assert_pairs_intact(ex.messages)
        is_event = "history.compaction" in ex.action_labels()
        events += is_event
        if previous is not None:
            extends = ex.messages[:len(previous)] == previous
            assert extends or is_event, "history was rewritten outside a compaction event"
            kept += extends
        previous = ex.messages
    assert 2 <= events <= 6  # an event every ~8 steps, not every step
    assert kept >= 39 - events


def test_an_event_leaves_every_earlier_block_untouched(services):
    policy = HistoryPolicy(HistoryConfig(**CONFIG, max_summaries=50), services)
    blocks_before: list[str] = []
    for sent in agent_loop(40):
        ex = forward(policy, sent)
        blocks = [text for m in ex.messages for text in summary_sections(m)]
        assert blocks[:len(blocks_before)] == blocks_before, "an earlier frozen block changed"
        blocks_before = blocks
    assert len(blocks_before) >= 2


def test_a_replay_on_a_fresh_policy_gives_byte_identical_messages(services, tmp_path):
    first = HistoryPolicy(HistoryConfig(**CONFIG), services)
    history = agent_loop(33)
    for sent in history:  # the first replica saw every step
        seen = forward(first, sent)
    # a restart or another replica sees only the latest request, with empty caches
    fresh_services = Services(tokens=services.tokens, metrics=RecordingMetrics(), store=services.store)
    replay = forward(HistoryPolicy(HistoryConfig(**CONFIG), fresh_services), history[-1])
    assert json.dumps(replay.messages) == json.dumps(seen.messages)
    assert "history.compaction" in ",".join(seen.action_labels()) or seen.messages != history[-1]


def test_a_budget_event_compacts_down_to_the_target_and_buys_headroom(services):
    policy = HistoryPolicy(HistoryConfig(max_messages=10**4, max_tokens=10**7), services)  # only the budget acts
    counter = services.tokens
    steps = agent_loop(60)
    window = 40_000
    budget_events = []
    for i, sent in enumerate(steps):
        ex = forward(policy, sent, window=window)
        size = counter.count_messages(ex.messages, "gpt-4o")
        assert size <= int(0.8 * window) + 2500, f"step {i}: {size} tokens forwarded"
        if "history.compaction" in ex.action_labels():
            budget_events.append(i)
            assert size <= int(0.6 * window) + 1500  # hysteresis: down to the target, not just under the mark
    assert budget_events and len(budget_events) <= len(steps) // 5


def test_an_elided_json_item_is_found_by_recall_with_a_query(services):
    policy = HistoryPolicy(HistoryConfig(**CONFIG), services)
    ex = forward(policy, agent_loop(40)[-1])
    forwarded = json.dumps(ex.messages)
    assert "ZX9-KD41" not in forwarded  # elided from the digest of step 5's result
    assert refs_in(ex.messages)
    recall = ex.proxy_tools["context_recall"]
    answer = asyncio.run(recall.handler(ex, json.dumps({"query": "tracking of order ORD-471147"})))
    assert "ZX9-KD41" in answer


@pytest.mark.parametrize("seed", range(5))
def test_the_plan_is_monotone_in_the_conversation(seed):
    """Planning a longer conversation never changes what an earlier event froze (pure planner)."""
    rng = random.Random(seed)
    n = 60
    tokens = [rng.randint(50, 3000) for _ in range(n)]
    units = Units(starts=list(range(n)), messages=[1] * n, tokens=tokens, is_user=[i % 9 == 0 for i in range(n)],
                  ends_request=[True] * n, times=[None] * n)
    marks = Marks(max_messages=20, max_tokens=2000, keep_recent=6, event_min_exchanges=8, event_min_tokens=20_000,
                  max_summaries=50, budget_high=60_000, budget_low=40_000)
    estimate = lambda a, b: 40 + sum(tokens[a:b]) // 10  # noqa: E731
    merge = lambda sizes: min(sum(sizes), 1200)  # noqa: E731
    previous = None
    for k in range(1, n + 1):
        short = Units(units.starts[:k], units.messages[:k], tokens[:k], units.is_user[:k], units.ends_request[:k], units.times[:k])
        p = plan(short, marks, estimate, merge)
        if previous is not None:
            assert [(s.kind, s.start, s.end, s.at) for s in p.segments[:len(previous.segments)]] == \
                   [(s.kind, s.start, s.end, s.at) for s in previous.segments]
            assert p.events[:len(previous.events)] == previous.events
        previous = p
    assert previous is not None and previous.events


@pytest.mark.parametrize("share,most_tail", [(0.05, 1), (1.0, 3)])
def test_a_budget_event_compacts_the_verbatim_tail_down_to_its_share_of_the_window(services, share, most_tail):
    """At a budget event the verbatim tail (keep_recent: 3 tool exchanges here) keeps at most
    `tail_share` of the window, the newest exchange always: a tight window gets more steps per event."""
    policy = HistoryPolicy(HistoryConfig(max_messages=10**4, max_tokens=10**7, tail_share=share), services)
    window = 40_000
    tails = []
    for sent in agent_loop(40):
        ex = forward(policy, sent, window=window)
        if "history.compaction" in ex.action_labels():
            newest = ex.messages[-2:]
            assert newest == sent[-2:], "the newest exchange is forwarded verbatim"
            tails.append(sum(1 for m in ex.messages if m.get("role") == "tool"))
    assert tails, "the window fills: at least one budget event"
    assert max(tails) <= most_tail if share < 1 else min(tails) >= most_tail


def test_budget_events_roll_the_blocks_up_to_their_share_and_recall_still_finds_every_result(services):
    """A long loop in a tight window: every budget event adds a block, and blocks left to grow become most
    of what an event leaves, so events come ever closer. They are rolled up to `blocks_share` of the
    window instead (an event rewrites the history from the first block anyway), and a query still
    finds a record of a result whose digest line the roll-up dropped (the span's archive names it)."""
    window, share = 32_000, 0.05
    policy = HistoryPolicy(HistoryConfig(max_messages=10**4, max_tokens=10**7, blocks_share=share), services)
    counter = services.tokens
    events, summary_tokens, merges = [], [], 0
    for i, sent in enumerate(agent_loop(90)):
        ex = forward(policy, sent, window=window)
        if "history.compaction" in ex.action_labels():
            events.append(i)
            merges += "history.merge" in ex.action_labels()
            summary_tokens.append(sum(counter.count_text(s, "gpt-4o") for m in ex.messages for s in summary_sections(m)))
    assert len(events) >= 4, "the window fills several times"
    assert merges >= len(events) - 1, "every event after the first rolls the blocks up"
    # The first event writes one block (its size is the summary's own budget); from the second on, the
    # blocks are rolled up to the share, plus the header (who wrote it, the span refs: one per event)
    assert max(summary_tokens[1:]) <= share * window + 15 * len(events) + 60, summary_tokens
    gaps = [b - a for a, b in zip(events, events[1:])]
    assert min(gaps[1:]) >= max(2, gaps[0] // 2), f"events came ever closer: {events}"
    forwarded = json.dumps(ex.messages)
    assert "ZX9-KD41" not in forwarded
    answer = asyncio.run(ex.proxy_tools["context_recall"].handler(ex, json.dumps({"query": "tracking of order ORD-471147"})))
    assert "ZX9-KD41" in answer
