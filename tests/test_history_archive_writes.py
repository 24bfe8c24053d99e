"""A compaction event writes what it archived (tool results, span transcripts) before the request
is forwarded, in one gathered write: the refs the summaries name can be recalled on any replica at
once, and Chroma's commit, which holds the GIL, does not land on the session's next steps."""

from __future__ import annotations

import asyncio

from ctxwarden.policies.base import Exchange
from ctxwarden.policies.history.policy import HistoryConfig, HistoryPolicy
from ctxwarden.policies.history.scratchpad import Scratchpad
from tests.test_history_events import CONFIG, agent_loop, services  # noqa: F401  (the fixture)


def test_an_event_writes_its_archive_before_it_is_forwarded_and_the_steps_between_write_nothing(services,  # noqa: F811
                                                                                               monkeypatch):
    policy = HistoryPolicy(HistoryConfig(**CONFIG), services)
    writes: list[int] = []  # the step each write ended in
    step = [0]
    original = Scratchpad._persist_batch

    def persist(self, batch):
        original(self, batch)
        writes.append(step[0])

    monkeypatch.setattr(Scratchpad, "_persist_batch", persist)
    events: list[int] = []

    async def loop() -> None:  # one event loop for every request, as in the server
        for step[0], sent in enumerate(agent_loop(40)):
            ex = Exchange("t", "gpt-4o", sent, None, {"model": "gpt-4o", "messages": sent}, tenant="acme", session_id="s1")
            await policy.on_request(ex)
            if "history.compaction" in ex.action_labels():
                events.append(step[0])
                assert not policy.scratchpad._pending  # written before the request went on
            await asyncio.sleep(0.01)  # the upstream's turn, then the next step

    asyncio.run(loop())
    assert len(events) >= 2 and writes and set(writes) <= set(events), (events, writes)


def test_an_event_waits_for_a_slow_store_only_so_long(services, monkeypatch):  # noqa: F811
    import time

    from ctxwarden.policies.history import policy as history_policy

    policy = HistoryPolicy(HistoryConfig(**CONFIG), services)
    original = Scratchpad._persist_batch
    writing: list[bool] = []

    def slow(self, batch):
        writing.append(True)
        time.sleep(1.0)
        original(self, batch)
        writing.pop()

    monkeypatch.setattr(Scratchpad, "_persist_batch", slow)
    monkeypatch.setattr(history_policy, "WRITE_WAIT_S", 0.05)
    went_on: list[bool] = []

    async def loop() -> None:
        for sent in agent_loop(40):
            ex = Exchange("t", "gpt-4o", sent, None, {"model": "gpt-4o", "messages": sent}, tenant="acme", session_id="s1")
            await policy.on_request(ex)
            if "history.compaction" in ex.action_labels():
                went_on.append(bool(writing))  # the event went on while its write was still going
        await policy.scratchpad.flush()  # the writes went on behind the requests

    asyncio.run(loop())
    assert any(went_on), went_on  # (an event that only rolls blocks up archives nothing)
    assert not policy.scratchpad._pending and not writing
