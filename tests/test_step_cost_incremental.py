"""Issue 45: an agent sends its whole history again at every step; what the policies learn of a
message (its key, tokens, refs, the poisoning check's text) is made once, then carried to the
session's next request for the messages it sends again (policies/messages.py: request_memo,
remembered). Each check counts the calls of an analysis, never times it."""

from __future__ import annotations

import json
from collections import Counter

import httpx

from ctxwarden.policies import messages as messages_module
from ctxwarden.policies.history import layout, scratchpad
from ctxwarden.policies.history.layout import message_key
from ctxwarden.policies.messages import Carried, fingerprint, remembered, request_memo
from ctxwarden.policies.text.tokens import TiktokenCounter
from tests.conftest import policies_off


def call(i: int) -> dict:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"call_{i}", "type": "function", "function": {"name": "fetch", "arguments": json.dumps({"page": i})}}]}


def result(i: int) -> dict:
    return {"role": "tool", "tool_call_id": f"call_{i}", "content": f"page {i}: " + "rows shipped late " * 40}


def steps(n: int) -> list[list[dict]]:
    """The message list an agent sends at each of n steps (each a fresh parse, as the proxy gets it)."""
    history = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "Reconcile the orders."}]
    out = []
    for i in range(n):
        history = [*history, call(i), result(i)]
        out.append(json.loads(json.dumps(history)))
    return out


# ----------------------------------------------------------------------------- the fingerprint


def test_a_fingerprint_tells_apart_every_field_and_is_none_for_shapes_it_does_not_cover():
    base = result(1)
    variants = [base, {**base, "content": base["content"] + "."}, {**base, "tool_call_id": "call_2"},
                {**base, "name": "fetch"}, {**base, "role": "user"}, call(1), call(2),
                {**call(1), "tool_calls": [{**call(1)["tool_calls"][0], "id": "other"}]}]
    prints = [fingerprint(m) for m in variants]
    assert None not in prints and len(set(prints)) == len(prints)
    assert fingerprint(json.loads(json.dumps(base))) == fingerprint(base)  # a fresh parse of the same message
    assert fingerprint({"role": "user", "content": [{"type": "text", "text": "hi"}]}) is None  # list content
    assert fingerprint({"role": "user", "content": "hi", "name": 1}) is None  # 1 and True hash alike
    assert fingerprint({"role": "user", "content": "hi", "x-extra": "y"}) is None


def test_the_cached_message_key_is_the_key_of_its_bytes():
    for message in [result(3), call(3), {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                    {"role": "assistant", "content": "ok", "refusal": None}]:
        fresh = json.loads(json.dumps(message))
        assert message_key(message) == layout._stable_key(fresh) == message_key(fresh)


# ----------------------------------------------------------------------------- the memo


def test_an_analysis_is_made_once_per_message_and_carried_to_an_equal_message_of_the_next_request():
    made = Counter()

    def analyse(message: dict) -> int:
        made[message["content"] or message["tool_calls"][0]["id"]] += 1
        return len(message.get("content") or "")

    carried = None
    for messages in steps(5):
        with request_memo(messages, carried) as memo:
            for _ in range(3):  # three policies read every message
                [remembered("length", m, analyse) for m in messages]
            [fingerprint(m) for m in messages]
        carried = Carried(messages, memo)
    assert set(made.values()) == {1}  # each message analysed once over the five requests
    assert len(made) == 2 + 2 * 5


def test_a_changed_message_is_analysed_again_and_the_memo_ends_with_its_request():
    made = []
    first, second = steps(2)
    with request_memo(first) as memo:
        [remembered("x", m, made.append) for m in first]
        [fingerprint(m) for m in first]
    carried = Carried(first, memo)
    renamed = {**second[2]["tool_calls"][0], "id": "call_edited"}
    edited = [*second[:2], {**second[2], "tool_calls": [renamed]}, *second[3:]]
    made.clear()
    with request_memo(edited, carried):
        [remembered("x", m, made.append) for m in edited]
    assert made == [edited[2], *edited[4:]]  # the edited message and the new ones; the equal ones are carried
    made.clear()
    remembered("x", edited[0], made.append)  # outside a request nothing is remembered
    remembered("x", edited[0], made.append)
    assert made == [edited[0], edited[0]]


def test_what_is_carried_is_bounded_by_its_bytes():
    from ctxwarden.proxy.pipeline import Pipeline  # noqa: F401  (the store is the pipeline's; its bound is checked below)

    messages = steps(3)[-1]
    with request_memo(messages) as memo:
        [fingerprint(m) for m in messages]
    carried = Carried(messages, memo)
    assert len(carried.messages) == len(messages)
    assert carried.bytes >= sum(len(m.get("content") or "") for m in messages)
    for cache in (layout._KEYS, scratchpad._REFS):
        assert cache.max_bytes is not None


# ----------------------------------------------------------------------------- through the real server


def test_each_message_is_counted_keyed_and_scanned_once_over_an_agent_loop(fake, start_proxy, monkeypatch):
    counted, keyed, scanned, checked = Counter(), Counter(), Counter(), Counter()
    count_message = TiktokenCounter.count_message

    def counting(self, message, model):
        if message.get("role") in ("tool", "assistant"):
            counted[json.dumps(message, sort_keys=True)] += 1
        return count_message(self, message, model)

    def tally(table: Counter, fn):
        def wrapped(message):
            if message.get("role") in ("tool", "assistant"):
                table[json.dumps(message, sort_keys=True)] += 1
            return fn(message)
        return wrapped

    monkeypatch.setattr(TiktokenCounter, "count_message", counting)
    layout._KEYS.clear(), scratchpad._REFS.clear()  # process-wide: other tests may have seen these messages
    monkeypatch.setattr(layout, "_stable_key", tally(keyed, layout._stable_key))
    monkeypatch.setattr(scratchpad, "_scan_refs", tally(scanned, scratchpad._scan_refs))
    from ctxwarden.policies.poisoning import policy as poisoning

    monkeypatch.setattr(poisoning, "_without_notes", tally(checked, poisoning._without_notes))
    proxy = start_proxy({"policies": policies_off("history", "archive", "poisoning")})
    for messages in steps(8):
        response = httpx.post(f"{proxy.url}/v1/chat/completions", timeout=30, headers={"x-ctxwarden-session": "agent"},
                              json={"model": "gpt-4o", "messages": messages})
        assert response.status_code == 200
    # 8 calls and 8 results, each once; refs are read in tool results (and user turns) only
    for name, table, size in (("counted", counted, 16), ("keyed", keyed, 16), ("scanned", scanned, 8),
                              ("checked", checked, 16)):
        assert len(table) == size and set(table.values()) == {1}, (name, sorted(table.values()))
    assert messages_module._MEMO.get() is None


def test_work_on_a_carried_history_stays_on_the_event_loop_and_new_bulk_goes_to_a_thread():
    from ctxwarden.policies.messages import LIGHT_CHARS, light_work

    big = [{"role": "tool", "tool_call_id": f"call_{i}", "content": "x" * 4000} for i in range(20)]
    assert not light_work()  # outside a request: the body's size decides, as before
    with request_memo(big) as memo:
        assert not light_work()  # a session's first request: 80,000 new characters
    carried = Carried(big, memo)
    newer = [*json.loads(json.dumps(big)), {"role": "user", "content": "and now?"}]
    with request_memo(newer, carried):
        assert light_work()  # only the last message is new
    bulk = [*newer, {"role": "tool", "tool_call_id": "call_x", "content": "y" * (LIGHT_CHARS + 1)}]
    with request_memo(bulk, carried):
        assert not light_work()


# ----------------------------------------------------------------------------- the planner resumes


def test_a_resumed_replay_plans_what_a_replay_from_the_start_plans(monkeypatch):
    import random

    from ctxwarden.policies.history import events
    from ctxwarden.policies.history.events import Marks, Units, plan, resumed_plan

    for seed in range(6):
        rng = random.Random(seed)
        n = 70
        tokens = [rng.randint(50, 3000) for _ in range(n)]
        is_user = [i % 9 == 0 or rng.random() < 0.05 for i in range(n)]
        ends = [u or rng.random() < 0.8 for u in is_user]  # some units end no request (a call still unanswered)
        times = [1000.0 + 60 * i if seed % 2 else None for i in range(n)]
        marks = Marks(max_messages=20, max_tokens=2000, keep_recent=6, event_min_exchanges=8, event_min_tokens=20_000,
                      max_summaries=4, budget_high=60_000, budget_low=40_000, max_age_s=1800 if seed % 2 else None,
                      budget_tail=8_000, budget_blocks=3_000)
        estimate = lambda a, b: 40 + sum(tokens[a:b]) // 10  # noqa: E731
        merge = lambda sizes: min(sum(sizes), 1200)  # noqa: E731
        replay, resumed = None, 0
        for k in range(1, n + 1, rng.choice((1, 2))):
            short = Units(list(range(k)), [1] * k, tokens[:k], is_user[:k], ends[:k], times[:k])

            def read(j: int, short: Units = short) -> tuple:
                return (marks, tuple(short.tokens[:j]), tuple(short.is_user[:j]), tuple(short.ends_request[:j]),
                        tuple(short.times[:j]))

            fired = []
            monkeypatch.setattr(events, "_trigger", lambda *a, _t=events._trigger: fired.append(a[5]) or _t(*a))
            got, next_replay = resumed_plan(short, marks, estimate, merge, replay, read)
            monkeypatch.undo()
            resumed += bool(replay is not None and fired and min(fired) > 1)
            want = plan(short, marks, estimate, merge)
            assert (got.frontier, got.segments, got.events) == (want.frontier, want.segments, want.events)
            replay = next_replay
        assert resumed > 10  # the replays did resume (each reading only the boundaries after the last one)
