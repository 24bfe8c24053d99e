"""The loops policy on Exchanges directly: actions, note placement, session memory, retry counter."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from ctxwarden.policies.base import Exchange, Respond, Services
from ctxwarden.policies.cache import LRU
from ctxwarden.policies.loops.policy import LoopsConfig, LoopsPolicy
from ctxwarden.policies.loops.state import SessionState
from ctxwarden.policies.messages import append_note
from tests.test_loops_detect import A, B, C, convo


class RecordingMetrics:
    def __init__(self) -> None:
        self.added: list[tuple[str, float, dict]] = []

    def add(self, name: str, value: float = 1, **attrs: Any) -> None:
        self.added.append((name, value, attrs))

    def record(self, name: str, value: float, **attrs: Any) -> None: ...
    def gauge(self, name: str, value: float, **attrs: Any) -> None: ...

    def total(self, name: str, **attrs: Any) -> float:
        return sum(v for n, v, a in self.added if n == name and all(a.get(k) == x for k, x in attrs.items()))


def make_policy(**cfg: Any) -> tuple[LoopsPolicy, RecordingMetrics]:
    metrics = RecordingMetrics()
    return LoopsPolicy(LoopsConfig(**cfg), Services(tokens=None, metrics=metrics)), metrics  # type: ignore[arg-type]


def exchange(messages: list[dict], session: str = "s1", tenant: str | None = None) -> Exchange:
    return Exchange(request_id="r", model="m", messages=messages, tools=None, body={"messages": messages},
                    session_id=session, tenant=tenant)


def run(coro):
    return asyncio.run(coro)


# ----------------------------------------------------------------------------- loops


def test_stop_answers_from_the_proxy_and_names_the_calls():
    policy, metrics = make_policy(action="stop")
    ex = exchange(convo(A(), B(), A(), B(), A(), B()))
    verdict = run(policy.on_request(ex))
    assert isinstance(verdict, Respond) and verdict.reason == "loops.stop"
    assert "search_flights(" in verdict.content and "get_price(" in verdict.content
    assert "3 times" in verdict.content
    assert ex.action_labels() == ["loops.stop"]
    assert ex.actions[0].detail["kind"] == "cycle" and ex.actions[0].detail["period"] == 2
    assert metrics.total("ctxwarden.loops.detected", kind="cycle") == 1
    assert metrics.total("ctxwarden.loops.stops") == 1


def test_no_loop_leaves_the_request_untouched():
    policy, metrics = make_policy(action="inject")
    msgs = convo(A("error: timeout"), A("2 flights"), B())
    ex = exchange(msgs)
    assert run(policy.on_request(ex)) is None
    assert ex.messages is ex.original_messages and not ex.actions


def test_inject_appends_a_note_after_the_tail_keeping_the_prefix():
    policy, metrics = make_policy(action="inject")
    msgs = convo(A(), A(), A())
    before = copy.deepcopy(msgs)
    ex = exchange(msgs)
    assert run(policy.on_request(ex)) is None
    assert ex.messages == before and len(ex.notes.end_notes) == 1  # the pipeline appends it after every policy
    forwarded = append_note(ex.messages, ex.notes.end_notes[0])
    assert forwarded[:-1] == before and msgs == before  # client's list untouched, prefix byte-identical
    note = forwarded[-1]
    assert note["role"] == "user" and note["content"].startswith("[ctxwarden] Loop guard")  # never a late system message
    assert "search_flights(" in note["content"] and "change approach" in note["content"].lower()
    assert ex.action_labels() == ["loops.inject"]
    assert metrics.total("ctxwarden.loops.injections") == 1


def test_inject_never_adds_a_system_or_developer_message_after_the_first():
    policy, _ = make_policy(action="inject")
    msgs = convo(A(), A(), A())
    msgs[0] = {"role": "developer", "content": "You are a travel agent."}
    ex = exchange(msgs)
    run(policy.on_request(ex))
    forwarded = append_note(ex.messages, "\n\n".join(ex.notes.end_notes))
    assert [m["role"] for m in forwarded[1:] if m["role"] in ("system", "developer")] == []
    assert forwarded[-1]["role"] == "user" and forwarded[-2]["role"] == "tool"


def test_inject_note_is_the_same_bytes_for_the_same_request():
    notes = []
    for _ in range(2):
        policy, _ = make_policy(action="inject")  # a fresh policy: a restart or another replica
        ex = exchange(convo(A(), B(), A(), B(), A(), B()))
        run(policy.on_request(ex))
        notes.append(ex.notes.end_notes)
    assert notes[0] == notes[1]


def test_stop_is_marked_as_the_proxy_intervening():
    verdict = run(make_policy(action="stop")[0].on_request(exchange(convo(A(), A(), A()))))
    assert isinstance(verdict, Respond) and verdict.finish_reason == "content_filter"
    assert verdict.content.startswith("[ctxwarden] I stopped this agent run")


def test_a_long_run_of_distinct_calls_is_not_a_loop_by_default():
    assert LoopsConfig().max_tool_rounds is None
    policy, metrics = make_policy()
    steps = [("read_file", {"path": f"src/{i}.py"}, f"contents {i}") for i in range(300)]
    ex = exchange(convo(*steps))
    assert run(policy.on_request(ex)) is None and not ex.actions
    assert metrics.total("ctxwarden.loops.detected") == 0


def test_inject_then_stop_when_the_loop_continues():
    policy, metrics = make_policy(action="inject")
    first = exchange(convo(A(), B(), A(), B(), A(), B()))
    assert run(policy.on_request(first)) is None
    resent = exchange(convo(A(), B(), A(), B(), A(), B()))  # the same request again: note again, no stop
    assert run(policy.on_request(resent)) is None and resent.action_labels() == ["loops.inject"]
    continued = exchange(convo(A(), B(), A(), B(), A(), B(), A()))
    verdict = run(policy.on_request(continued))
    assert isinstance(verdict, Respond) and "after a note" in verdict.content
    assert continued.actions[0].detail["after_note"] is True


def test_note_memory_is_per_session_and_per_turn():
    policy, _ = make_policy(action="inject")
    run(policy.on_request(exchange(convo(A(), A(), A()), session="s1")))
    other = exchange(convo(A(), A(), A(), A()), session="s2")
    assert run(policy.on_request(other)) is None and other.action_labels() == ["loops.inject"]
    new_turn = exchange(convo(A(), A(), A(), A(), user="Try the 2nd of June."), session="s1")
    assert run(policy.on_request(new_turn)) is None and new_turn.action_labels() == ["loops.inject"]


def test_too_many_rounds_inject_then_stop():
    policy, _ = make_policy(action="inject", max_tool_rounds=4)
    steps = [("read", {"i": i}, f"r{i}") for i in range(6)]
    assert run(policy.on_request(exchange(convo(*steps[:5])))) is None
    verdict = run(policy.on_request(exchange(convo(*steps))))
    assert isinstance(verdict, Respond) and "tool-call rounds" in verdict.content


# ----------------------------------------------------------------------------- retry counter


def refused(policy: LoopsPolicy, msgs: list[dict], session: str, by: tuple[str, str] = ("budget", "reject"),
            outcome: str = "rejected") -> Exchange:
    ex = exchange(msgs, session)
    assert run(policy.on_request(ex)) is None
    ex.record(*by)
    ex.notes.verdict_by = by[0]  # as the pipeline notes the policy whose verdict ended the exchange
    run(policy.on_complete(ex, outcome))
    return ex


def test_retries_exhausted_answers_with_the_error_state_and_success_resets():
    policy, metrics = make_policy(max_retries=3)
    msgs = convo(C())
    for _ in range(3):
        refused(policy, msgs, "s1")
    ex = exchange(msgs, "s1")
    verdict = run(policy.on_request(ex))
    assert isinstance(verdict, Respond) and verdict.reason == "loops.retries_exhausted"
    assert "budget.reject ×3" in verdict.content
    assert metrics.total("ctxwarden.loops.retries_exhausted") == 1
    run(policy.on_complete(ex, "responded"))  # our own answer neither counts nor resets
    assert isinstance(run(policy.on_request(exchange(msgs, "s1"))), Respond)
    assert run(policy.on_request(exchange(msgs, "s2"))) is None  # other sessions unaffected
    # a new user message gets one trial; it succeeds → counter reset
    trial = exchange(convo(C(), user="Just tell me the date."), "s1")
    assert run(policy.on_request(trial)) is None
    run(policy.on_complete(trial, "ok"))
    refused(policy, msgs, "s1")
    assert run(policy.on_request(exchange(msgs, "s1"))) is None


def test_two_tenants_sending_the_same_session_id_do_not_share_a_counter():
    policy, _ = make_policy(max_retries=2)
    msgs = convo(C())
    for _ in range(2):
        ex = exchange(msgs, "same-session", tenant="acme")
        assert run(policy.on_request(ex)) is None
        ex.record("budget", "reject")
        ex.notes.verdict_by = "budget"
        run(policy.on_complete(ex, "rejected"))
    assert isinstance(run(policy.on_request(exchange(msgs, "same-session", tenant="acme"))), Respond)
    assert run(policy.on_request(exchange(msgs, "same-session", tenant="acme-eu"))) is None
    assert run(policy.on_request(exchange(msgs, "same-session"))) is None


def test_a_failed_trial_in_a_new_turn_reopens_the_breaker():
    policy, _ = make_policy(max_retries=2)
    refused(policy, convo(C()), "s1")
    refused(policy, convo(C()), "s1")
    msgs = convo(C(), user="Another question")
    refused(policy, msgs, "s1", by=("poisoning", "block"), outcome="blocked")
    verdict = run(policy.on_request(exchange(msgs, "s1")))
    assert isinstance(verdict, Respond) and "poisoning.block" in verdict.content


def test_upstream_errors_are_not_counted_as_refusals():
    policy, _ = make_policy(max_retries=2)
    msgs = convo(C())
    for _ in range(3):
        ex = exchange(msgs, "s1")
        run(policy.on_request(ex))
        ex.record("history", "summarize")
        run(policy.on_complete(ex, "rejected"))  # e.g. the upstream answered 429: no policy refused it
    assert run(policy.on_request(exchange(msgs, "s1"))) is None


def test_max_retries_null_switches_the_counter_off():
    policy, _ = make_policy(max_retries=None)
    for _ in range(5):
        refused(policy, convo(C()), "s1")
    assert run(policy.on_request(exchange(convo(C()), "s1"))) is None


# ----------------------------------------------------------------------------- memory bounds


def test_session_memory_is_bounded_by_count_and_idle_time():
    now = [0.0]
    memory = LRU(2, ttl_s=10, clock=lambda: now[0])  # as the policy holds its sessions
    memory.get_or_create("a", SessionState).failures = 1
    memory.get_or_create("b", SessionState).failures = 1
    memory.get("a")  # a is now the most recent
    memory.get_or_create("c", SessionState)
    assert memory.get("b") is None and memory.get("a").failures == 1 and len(memory) == 2
    now[0] = 11
    assert memory.get("a") is None and len(memory) == 0
    assert memory.get_or_create("a", SessionState).failures == 0  # an expired session starts afresh


def test_every_trigger_is_logged_with_its_transition_history(caplog):
    policy, _ = make_policy(action="stop")
    with caplog.at_level("WARNING", logger="ctxwarden.loops"):
        run(policy.on_request(exchange(convo(C(), A(), B(), A(), B(), A(), B()))))
    (record,) = [r for r in caplog.records if "loop detected" in r.getMessage()]
    assert 'check_calendar(day="2024-06-01") → search_flights(' in record.getMessage()
