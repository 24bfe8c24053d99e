"""A client that leaves stops the work (issue 41): the policies' work in worker threads sees the
disconnect, the upstream is never called, and the exchange says why."""

from __future__ import annotations

import threading

import httpx
import pytest

from tests.conftest import policies_off

SENTENCE = "We are staying in Lisbon for {n} nights with a budget of ${m} and flying out on May {d}. "


def test_a_client_that_disconnects_stops_the_policies_and_nothing_is_forwarded(fake, start_proxy):
    proxy = start_proxy({
        "models": {"gpt-4o": {"context_window": 10_000_000}},
        # no time budget and a wide reading window: only the client's leaving can stop this work
        "policies": {**policies_off("clash"), "clash": {"enabled": True, "budget_ms": None, "analysis_max_chars": 100_000}},
    })
    ended: list = []
    done = threading.Event()

    def listener(ex, outcome):
        ended.append((ex, outcome))
        done.set()

    proxy.app.state.pipeline.listeners.append(listener)
    messages = []
    for i in range(40):  # 40 user messages of ~50 KB: several seconds of reading, checked between messages
        messages.append({"role": "user", "content": "".join(SENTENCE.format(n=k % 9 + 1, m=100 + k, d=k % 28 + 1)
                                                            for k in range(i, i + 600))})
        messages.append({"role": "assistant", "content": "Noted."})
    messages.append({"role": "user", "content": "So what do you suggest?"})
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{proxy.url}/v1/chat/completions", json={"model": "gpt-4o", "messages": messages}, timeout=1.0)
    assert done.wait(30), "the exchange never ended"
    ex, outcome = ended[0]
    labels = [a.label for a in ex.actions]
    assert outcome == "rejected" and "proxy.client_disconnected" in labels
    skipped = [a for a in ex.actions if a.label == "clash.skipped_budget"]
    assert skipped and skipped[0].detail["reason"] == "cancelled"
    assert fake.chat_requests == []
