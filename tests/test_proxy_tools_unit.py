"""Proxy-tool rounds without HTTP: splitting calls, answering, the round limit, drops per owner."""

from __future__ import annotations

import json

import httpx

from ctxwarden.policies.base import Exchange, ProxyTool
from ctxwarden.proxy.proxy_tools import ProxyToolRounds


def tool(name: str, owner: str = "archive", fail: bool = False) -> ProxyTool:
    async def handler(ex: Exchange, arguments: str) -> str:
        if fail:
            raise RuntimeError("boom")
        return f"{name}:{json.loads(arguments)['ref']}"

    return ProxyTool({"type": "function", "function": {"name": name, "parameters": {}}}, handler, owner=owner)


def call(name: str, ref: str = "r1", call_id: str = "c1") -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps({"ref": ref})}}


def exchange(*tools: ProxyTool, rounds: int | None = None) -> Exchange:
    ex = Exchange(request_id="r", model="gpt-4o", messages=[{"role": "user", "content": "q"}], tools=None, body={})
    ex.proxy_tools = {t.name: t for t in tools}
    ex.notes.proxy_tool_rounds = rounds
    return ex


def answer(*calls: dict, usage: int = 1) -> dict:
    message = {"role": "assistant", "content": None, "tool_calls": list(calls)} if calls else {"role": "assistant", "content": "done"}
    return {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": {"prompt_tokens": usage, "completion_tokens": usage, "total_tokens": 2 * usage}}


class Upstream:
    """Answers each next round with the next prepared answer and keeps the bodies it was sent."""

    def __init__(self, *answers: dict) -> None:
        self.answers = list(answers)
        self.bodies: list[dict] = []

    async def __call__(self, body: dict) -> httpx.Response:
        self.bodies.append(body)
        return httpx.Response(200, json=self.answers.pop(0))


def test_split_keeps_order_and_tells_proxy_from_client_calls():
    rounds = ProxyToolRounds(exchange(tool("context_recall")), 3, Upstream())
    calls = [call("context_recall", call_id="a"), call("search", call_id="b"), call("context_recall", call_id="c")]
    proxy_calls, client_calls = rounds.split(calls)
    assert [c["id"] for c in proxy_calls] == ["a", "c"] and [c["id"] for c in client_calls] == ["b"]
    assert rounds.split([{"id": "x"}]) == ([], [{"id": "x"}])  # a call without a function is the client's


def test_the_policy_sets_the_round_limit():
    assert ProxyToolRounds(exchange(), 3, Upstream()).limit == 3
    assert ProxyToolRounds(exchange(rounds=0), 3, Upstream()).limit == 0


async def test_settle_answers_rounds_and_sums_usage():
    ex = exchange(tool("context_recall"))
    upstream = Upstream(answer(usage=5))
    data = await ProxyToolRounds(ex, 3, upstream).settle(answer(call("context_recall")))
    assert data["choices"][0]["message"]["content"] == "done"
    assert data["usage"] == {"prompt_tokens": 6, "completion_tokens": 6, "total_tokens": 12}
    echo, reply = upstream.bodies[0]["messages"][-2:]
    assert echo == {"role": "assistant", "content": None, "tool_calls": [call("context_recall")]}
    assert reply == {"role": "tool", "tool_call_id": "c1", "content": "context_recall:r1"}
    assert ex.actions == []


async def test_a_failing_handler_answers_an_error_text():
    ex = exchange(tool("context_recall", fail=True))
    answers = await ProxyToolRounds(ex, 3, Upstream()).answer([call("context_recall")])
    assert answers == [{"role": "tool", "tool_call_id": "c1", "content": "error: context_recall failed (RuntimeError)"}]


async def test_calls_left_after_the_last_round_are_dropped_under_their_owner():
    ex = exchange(tool("context_recall"), tool("peek", owner=""))
    upstream = Upstream(answer(call("context_recall", call_id="a"), call("peek", call_id="b"), call("context_recall", call_id="c")))
    data = await ProxyToolRounds(ex, 1, upstream).settle(answer(call("context_recall")))
    choice = data["choices"][0]
    assert "tool_calls" not in choice["message"] and choice["finish_reason"] == "stop"
    assert [(a.label, a.detail) for a in ex.actions] == [("archive.recall_dropped", {"calls": 2}),
                                                         ("proxy.recall_dropped", {"calls": 1})]


async def test_calls_mixed_with_client_calls_are_not_answered_and_leave_the_client_calls():
    ex = exchange(tool("context_recall"))
    upstream = Upstream()
    data = await ProxyToolRounds(ex, 3, upstream).settle(answer(call("context_recall", call_id="a"), call("search", call_id="b")))
    choice = data["choices"][0]
    assert [c["id"] for c in choice["message"]["tool_calls"]] == ["b"] and choice["finish_reason"] == "tool_calls"
    assert upstream.bodies == [] and ex.action_labels() == ["archive.recall_dropped"]
