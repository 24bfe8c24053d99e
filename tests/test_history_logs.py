"""Quiet logs: a long history is reported on every request (action, metric) and logged once per session."""

from __future__ import annotations

import asyncio
import logging

from ctxwarden.policies.base import Exchange, Services
from ctxwarden.policies.history.policy import HistoryConfig, HistoryPolicy
from ctxwarden.policies.text.tokens import TiktokenCounter
from tests.test_compression_e2e import agent_conversation
from tests.test_history_units import RecordingMetrics


def request(policy: HistoryPolicy, messages: list[dict], session: str, tenant: str | None = None) -> Exchange:
    ex = Exchange("r", "gpt-4o", messages, None, {"model": "gpt-4o", "messages": messages}, tenant=tenant, session_id=session)
    asyncio.run(policy.on_request(ex))
    return ex


def distraction_lines(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "ctxwarden.history" and "DISTRACTION" in r.getMessage()]


def test_a_distracting_history_is_logged_once_per_session_and_counted_every_request(caplog):
    metrics = RecordingMetrics()
    policy = HistoryPolicy(HistoryConfig(), Services(tokens=TiktokenCounter(), metrics=metrics))
    caplog.set_level(logging.INFO, logger="ctxwarden.history")
    for step in range(10):
        ex = request(policy, agent_conversation(30 + 2 * step), "session-a")
        assert "history.distraction" in ex.action_labels()  # the action stays reported
    assert len(distraction_lines(caplog)) == 1
    assert distraction_lines(caplog)[0].levelno == logging.WARNING
    request(policy, agent_conversation(30), "session-b")
    request(policy, agent_conversation(32), "session-b")
    assert len(distraction_lines(caplog)) == 2
    request(policy, agent_conversation(30), "session-a", tenant="other")  # another tenant's session of that id
    assert len(distraction_lines(caplog)) == 3
    counted = [a for name, _, a in metrics.added if name == "ctxwarden.history.distraction"]
    assert len(counted) == 13  # counted on every request


def test_the_sessions_remembered_are_bounded(caplog, monkeypatch):
    import ctxwarden.policies.history.policy as module

    monkeypatch.setattr(module, "WARNED_SESSIONS", 3)
    policy = HistoryPolicy(HistoryConfig(), Services(tokens=TiktokenCounter(), metrics=RecordingMetrics()))
    caplog.set_level(logging.INFO, logger="ctxwarden.history")
    conv = agent_conversation(30)
    for session in ("a", "b", "c", "d", "a"):  # "a" was forgotten (least recently used) when "d" came
        request(policy, conv, session)
    assert len(distraction_lines(caplog)) == 5
    assert len(policy._warned) == 3
