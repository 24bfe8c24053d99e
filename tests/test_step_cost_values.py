"""Issue 45, part 4: a step's policy work follows what is new in it. Per-message values are made
once and carried to the session's next request as whole lists (policies/messages.py:
message_values, carried_values), so a policy reads an agent's history by slices, not by a lookup
per message. Each check counts work (calls of an analysis, lookups per request), never times it."""

from __future__ import annotations

import json
from collections import Counter

import httpx

from ctxwarden.policies import messages as messages_module
from ctxwarden.policies.messages import (Carried, carried_values, last_user_index, message_values, remembered,
                                         request_memo)
from tests.conftest import policies_off
from tests.test_step_cost_incremental import steps


def run_steps(all_steps: list[list[dict]], body):
    """`body(messages)` inside each step's request_memo, carried as the pipeline carries it."""
    carried = None
    out = []
    for messages in all_steps:
        with request_memo(messages, carried) as memo:
            out.append(body(messages))
        carried = Carried(messages, memo)
    return out


def test_values_are_made_once_per_message_over_an_agent_loop_and_equal_a_plain_pass():
    made = Counter()

    def size(m: dict) -> int:
        made[json.dumps(m, sort_keys=True)] += 1
        return len(m.get("content") or "")

    all_steps = steps(20)
    values = run_steps(all_steps, lambda messages: list(message_values("size", messages, size)))
    assert values == [[len(m.get("content") or "") for m in s] for s in all_steps]
    assert len(made) == 2 + 2 * 20 and set(made.values()) == {1}  # every message once, over 20 requests


def test_a_step_looks_up_only_its_new_messages():
    """The lookups per request (remembered) stay the same as the history grows: the carried part of
    each value list is one slice, whatever its length."""
    lookups = []
    original = messages_module.remembered

    def counting(kind, message, compute):
        lookups[-1] += 1
        return original(kind, message, compute)

    def body(messages):
        lookups.append(0)
        messages_module.remembered = counting
        try:
            message_values("role", messages, lambda m: m.get("role"))
            message_values("chars", messages, lambda m: len(m.get("content") or ""))
        finally:
            messages_module.remembered = original
        return None

    run_steps(steps(40), body)
    assert lookups[5:] == [4] * 35  # two new messages × two kinds, at step 6 as at step 40


def test_a_list_ending_with_the_requests_messages_reads_their_values_and_makes_only_its_head():
    made = []
    all_steps = steps(30)

    def body(messages):
        summary = {"role": "user", "content": "[ctxwarden summary of 40 messages]"}
        edited = [messages[0], summary, *messages[42:]]  # as the history policy forwards after an event
        whole = carried_values("chars", messages, lambda m: made.append(m) or len(m.get("content") or ""))
        made.clear()
        got = carried_values("chars", edited, lambda m: made.append(m) or len(m.get("content") or ""))
        return whole, edited, got, list(made)

    whole, edited, got, made_for_edited = run_steps(all_steps, body)[-1]
    assert got == [len(m.get("content") or "") for m in edited]
    assert made_for_edited == [edited[1]]  # the new head only (the system prompt's value is remembered);
    # the tail is a slice of the request's own list
    assert last_user_index(edited) == 1
    assert carried_values("chars", edited, len) is None  # outside a request: the caller reads per message


def test_a_changed_message_breaks_the_carried_run_and_is_made_again():
    made = Counter()
    first, second = steps(2)
    changed = json.loads(json.dumps(second))
    changed[1]["content"] = "Reconcile the invoices instead."

    def body(messages):
        return list(message_values("text", messages, lambda m: made.update([m.get("content")]) or m.get("content")))

    values = run_steps([first, changed], body)
    assert values[1] == [m.get("content") for m in changed]
    assert made["Reconcile the invoices instead."] == 1 and made["You are an agent."] == 1
    assert remembered("k", changed[0], lambda m: 1) == 1  # outside a request: computed, nothing kept


def test_the_policies_look_up_the_same_number_of_messages_at_every_step(fake, start_proxy, monkeypatch):
    """Through the real server with the per-message policies on: the remembered lookups of a request's
    policies (every per-message analysis goes through them) are as many at step 30 as at step 8. (The
    proxy's prefix watch keys the forwarded messages after the policies, outside their memo: not
    counted here.)"""
    from ctxwarden.policies.history import layout, scratchpad
    from ctxwarden.policies.poisoning import inputs
    from ctxwarden.policies.poisoning import policy as poisoning

    per_request: list[int] = []
    original = messages_module.remembered
    for module in (messages_module, layout, scratchpad, inputs, poisoning):
        monkeypatch.setattr(module, "remembered", lambda *a: per_request.__setitem__(
            -1, per_request[-1] + (messages_module._MEMO.get() is not None)) or original(*a))
    proxy = start_proxy({"policies": policies_off("loops", "history", "archive", "poisoning")})
    for messages in steps(30):
        per_request.append(0)
        response = httpx.post(f"{proxy.url}/v1/chat/completions", timeout=30, headers={"x-ctxwarden-session": "agent"},
                              json={"model": "gpt-4o", "messages": messages})
        assert response.status_code == 200
    # flat between compaction events (one, at step 17, puts a summary in front: a few more from there on)
    assert len(set(per_request[7:15])) == 1 and len(set(per_request[-10:])) == 1, per_request
