"""Between compaction events the history policy forwards the front it made at the last one
(policies/history/forwarded.py): the same bytes as making it again, without making it again, and
never for a request whose earlier messages, owner or model differ."""

from __future__ import annotations

import asyncio
import copy
import json

from ctxwarden.policies.base import Exchange
from ctxwarden.policies.history.policy import HistoryConfig, HistoryPolicy
from ctxwarden.policies.messages import Carried, request_memo
from tests.test_history_events import CONFIG, agent_loop, services  # noqa: F401  (the fixture)


def send(policy: HistoryPolicy, messages: list[dict], user: str | None = None, model: str = "gpt-4o") -> Exchange:
    """One request as the server runs it: freshly parsed messages, within the request memo."""
    fresh = json.loads(json.dumps(messages))
    headers = {"x-ctxwarden-user": user} if user else {}
    ex = Exchange("t", model, fresh, None, {"model": model, "messages": fresh}, headers=headers, tenant="acme",
                  session_id="s1")
    with request_memo(fresh, None):
        asyncio.run(policy.on_request(ex))
    return ex


def test_the_front_kept_between_events_forwards_what_making_it_again_gives(services, monkeypatch):  # noqa: F811
    kept, fresh = HistoryPolicy(HistoryConfig(**CONFIG), services), HistoryPolicy(HistoryConfig(**CONFIG), services)
    made = []
    original = HistoryPolicy._materialize

    async def materialize(self, *args, **kwargs):
        if self is kept:
            made.append(1)
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(HistoryPolicy, "_materialize", materialize)
    events = reused = 0
    for sent in agent_loop(40):
        fresh._fronts.clear()  # made again at every request, as before the front was kept
        before = len(made)
        a, b = send(kept, sent), send(fresh, sent)
        assert a.messages == b.messages
        assert [(x.label, x.detail) for x in a.actions] == [(x.label, x.detail) for x in b.actions]
        events += "history.compaction" in a.action_labels()
        reused += "history.summarize" in a.action_labels() and "history.compaction" not in a.action_labels() \
            and len(made) == before
    assert events >= 2 and reused >= 10, (events, reused)


def test_an_edited_earlier_message_is_not_answered_with_the_kept_front(services):  # noqa: F811
    policy = HistoryPolicy(HistoryConfig(**CONFIG), services)
    steps = agent_loop(30)
    for sent in steps[:-1]:
        send(policy, sent)
    last = copy.deepcopy(steps[-1])
    first_result = next(i for i, m in enumerate(last) if m["role"] == "tool")
    text = last[first_result]["content"]  # one id changed, nothing else: the same plan and sizes
    at = text.index("ORD-") + 4
    last[first_result]["content"] = text[:at] + ("1" if text[at] != "1" else "2") + text[at + 1:]
    edited, plain = send(policy, last), send(policy, steps[-1])
    assert json.dumps(edited.messages) != json.dumps(plain.messages)
    again = HistoryPolicy(HistoryConfig(**CONFIG), services)
    assert edited.messages == send(again, last).messages  # what a policy that never saw the session forwards


def test_another_user_of_the_session_gets_a_front_of_their_own(services):  # noqa: F811
    policy = HistoryPolicy(HistoryConfig(**CONFIG), services)
    steps = agent_loop(30)
    for sent in steps:
        alice = send(policy, sent, user="alice")
    bob = send(policy, steps[-1], user="bob")
    refs = lambda ex: [m for m in json.dumps(ex.messages).split("ref=")[1:]]  # noqa: E731
    assert refs(alice) and refs(bob) != refs(alice)  # bob's blocks archive (and name) bob's copies


def test_the_front_reuses_this_requests_messages_not_the_last_ones(services):  # noqa: F811
    """Policies after history know a message by identity (the request memo): a kept message that the
    front forwards is the object this request parsed, and the carried memo still applies to it."""
    policy = HistoryPolicy(HistoryConfig(**CONFIG), services)
    previous = None
    for sent in agent_loop(30):
        fresh = json.loads(json.dumps(sent))
        ex = Exchange("t", "gpt-4o", fresh, None, {"model": "gpt-4o", "messages": fresh}, tenant="acme", session_id="s1")
        with request_memo(fresh, previous) as memo:
            asyncio.run(policy.on_request(ex))
        previous = Carried(fresh, memo)
        assert all(any(m is f for f in fresh) or "[ctxwarden: summary of" in json.dumps(m) for m in ex.messages)


def test_a_kept_front_counts_what_it_keeps_alive(services):  # noqa: F811
    """Its byte count bounds the fronts' cache: checked against a walk of what a front reaches."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from memory_probe import deep_size

    policy = HistoryPolicy(HistoryConfig(**CONFIG), services)
    for sent in agent_loop(30):
        send(policy, sent)
    front = policy._fronts.get(("acme", "s1"))
    assert front is not None and front.template
    assert front.size >= deep_size(front, set(), limit=10**8)
