"""Issue 45, part 4: the history planner's per-unit view (policies/history/columns.py) is carried to
the session's next request, so a step groups and counts only the units it added, and the view is
the one a pass from the start makes. Each check counts work, never times it."""

from __future__ import annotations

import json
import random

import httpx

from ctxwarden.policies import messages as messages_module
from ctxwarden.policies.history import columns as columns_module
from ctxwarden.policies.history.columns import unit_columns
from ctxwarden.policies.messages import group_exchanges
from tests.conftest import policies_off
from tests.test_step_cost_incremental import steps


def _conversation(rng: random.Random, n: int) -> list[dict]:
    """Users, assistant text, tool calls answered at once, later (a step sends part of the answers)
    or never, so units are extended and closed at every kind of step boundary."""
    out: list[dict] = []
    while len(out) < n:
        kind = rng.random()
        if kind < 0.2:
            out.append({"role": "user", "content": f"ask {len(out)}"})
        elif kind < 0.3:
            out.append({"role": "assistant", "content": f"text {len(out)}"})
        else:
            ids = [f"c{len(out)}_{j}" for j in range(rng.randint(1, 3))]
            out.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in ids]})
            for i in ids[:rng.randint(0, len(ids))]:
                out.append({"role": "tool", "tool_call_id": i, "content": f"result {i} " * rng.randint(1, 5)})
    return out


def _view(view) -> tuple:
    return tuple(tuple(map(tuple, getattr(view, name))) if name == "units" else tuple(getattr(view, name))
                 for name in columns_module.Columns.__slots__)


def _columns_of(body: list[dict], previous=None):
    roles = [m.get("role") for m in body]
    hashes = [json.dumps(m, sort_keys=True) for m in body]  # any per-message key: the reuse compares them
    tokens = [len(json.dumps(m)) for m in body]
    return unit_columns(body, roles, hashes, tokens, [None] * len(body), previous)


def test_a_carried_view_is_the_view_a_pass_from_the_start_makes():
    reused = 0
    for seed in range(20):
        rng = random.Random(seed)
        conversation = _conversation(rng, 80)
        previous, end = None, 1
        while end <= len(conversation):
            body = json.loads(json.dumps(conversation[:end]))  # each request a fresh parse
            got = _columns_of(body, previous)
            assert _view(got) == _view(_columns_of(body)), (seed, end)
            assert got.units == group_exchanges(body)
            reused += columns_module.reusable_units(previous, got.hashes, got.tokens, got.times) > 0
            previous, end = got, end + rng.randint(1, 3)
        edited = json.loads(json.dumps(conversation))  # a client that rewrites its history: nothing is reused
        edited[1] = {"role": "user", "content": "rewritten"}
        fresh = _columns_of(edited)
        assert columns_module.reusable_units(previous, fresh.hashes, fresh.tokens, fresh.times) == 0
        assert _view(_columns_of(edited, previous)) == _view(_columns_of(edited))
    assert reused > 300


def test_a_tool_answer_arriving_at_the_next_step_joins_its_call():
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in ("a", "b")]}
    first = [{"role": "user", "content": "go"}, call, {"role": "tool", "tool_call_id": "a", "content": "A"},
             {"role": "user", "content": "and?"}]
    second = [*first[:3], {"role": "tool", "tool_call_id": "b", "content": "B"}, {"role": "user", "content": "and?"}]
    got = _columns_of(second, _columns_of(first))
    assert got.units == group_exchanges(second) == [[0], [1, 2, 3], [4]]


def test_a_step_groups_only_what_it_added(fake, start_proxy, monkeypatch):
    """Through the proxy: the history policy groups the messages from the last request's last unit
    on, the same number at step 8 as at step 24."""
    grouped: list[int] = []
    original = messages_module.group_exchanges

    def counting(messages, start=0):
        units = original(messages, start)
        grouped.append(sum(len(u) for u in units))
        return units

    monkeypatch.setattr(columns_module, "group_exchanges", counting)
    proxy = start_proxy({"policies": policies_off("history")})
    for messages in steps(24):
        response = httpx.post(f"{proxy.url}/v1/chat/completions", timeout=30, headers={"x-ctxwarden-session": "agent"},
                              json={"model": "gpt-4o", "messages": messages})
        assert response.status_code == 200
    assert len(grouped) == 24 and grouped[-1] == grouped[8] <= 4, grouped
