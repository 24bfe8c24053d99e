"""Proxy-tool rounds: the proxy answers calls to the tools it added itself (e.g. context_recall).

When an answer calls only proxy tools, the proxy runs their handlers, appends the call and the
answers to the conversation and asks the upstream again, for at most `limit` rounds per request
(a policy may set the limit: `ex.notes.proxy_tool_rounds`). Proxy-tool calls left once the rounds
are used up, or mixed with calls to the client's own tools, never reach the client: they are
dropped and reported as `<owner>.recall_dropped`, under the policy that owns the tool.

Both answer paths use this: plain answers through `settle`, the stream relay through `split`,
`may_continue`, `continue_with` and `report_dropped`.
"""

from __future__ import annotations

import logging
from typing import Any, Awaitable, Callable

import httpx

from ctxwarden.policies.base import Exchange

from .upstream.client import completion_json

log = logging.getLogger("ctxwarden.proxy_tools")

Calls = list[dict[str, Any]]
AskAgain = Callable[[dict[str, Any]], Awaitable[httpx.Response]]  # the next round's body → upstream response

FALLBACK_OWNER = "proxy"  # reports a tool whose `owner` is empty


class ProxyToolRounds:
    """The proxy-tool rounds of one request."""

    def __init__(self, ex: Exchange, default_limit: int, ask_again: AskAgain | None = None) -> None:
        """`ask_again`: how `continue_with` asks the upstream in chat's shape; None where a handler
        drives the rounds in its own API's shape and uses only split/may_continue/answer/report."""
        self.ex = ex
        self.limit = default_limit if ex.notes.proxy_tool_rounds is None else ex.notes.proxy_tool_rounds
        self.rounds = 0
        # A streamed round's upstream call and its status (chat_rounds.py), ended with the round (end_round)
        self.in_flight: tuple[Any, int] | None = None
        self._ask_again = ask_again

    def split(self, calls: Calls) -> tuple[Calls, Calls]:
        """(the calls to proxy tools, the calls to the client's tools), each in the answer's order."""
        proxy_calls: Calls = []
        client_calls: Calls = []
        for call in calls:
            name = (call.get("function") or {}).get("name")
            (proxy_calls if name in self.ex.proxy_tools else client_calls).append(call)
        return proxy_calls, client_calls

    def may_continue(self, proxy_calls: Calls, client_calls: Calls) -> bool:
        """Whether the proxy answers this round itself: only proxy tools were called, rounds are left."""
        return bool(proxy_calls) and not client_calls and self.rounds < self.limit

    async def answer(self, calls: Calls) -> Calls:
        """One tool message per call; a failing handler answers with an error text, never a crash."""
        answers = []
        for call in calls:
            tool = self.ex.proxy_tools[call["function"]["name"]]
            try:
                result = await tool.handler(self.ex, call["function"].get("arguments") or "{}")
            except Exception as exc:
                log.exception("proxy tool %s failed", tool.name)
                result = f"error: {tool.name} failed ({type(exc).__name__})"
            answers.append({"role": "tool", "tool_call_id": call["id"], "content": result})
        return answers

    def end_round(self, usage: dict[str, Any] | None, model: Any) -> None:
        """A streamed round is over: its call ends with the usage it reported and the model it named."""
        if self.in_flight is not None:
            call, status = self.in_flight
            call.finish(status, usage or None, model)

    async def continue_with(self, assistant: dict[str, Any], proxy_calls: Calls) -> httpx.Response:
        """Answer the calls, add the assistant turn and the answers, and ask the upstream again."""
        self.rounds += 1
        answers = await self.answer(proxy_calls)
        self.ex.messages = [*self.ex.messages, assistant, *answers]
        assert self._ask_again is not None, "rounds driven in another API's shape never continue through chat"
        return await self._ask_again(self.ex.outgoing_body())

    def report_dropped(self, proxy_calls: Calls) -> None:
        """Record the proxy-tool calls left out of the client's answer, per owning policy."""
        per_owner: dict[str, int] = {}
        for call in proxy_calls:
            owner = self.ex.proxy_tools[call["function"]["name"]].owner or FALLBACK_OWNER
            per_owner[owner] = per_owner.get(owner, 0) + 1
        for owner, count in per_owner.items():
            self.ex.record(owner, "recall_dropped", calls=count)

    async def settle(self, data: dict[str, Any]) -> dict[str, Any]:
        """A plain (not streamed) answer after the proxy's rounds; usage summed over the rounds."""
        usage_total: dict[str, int] = {}
        while True:
            add_usage(usage_total, data.get("usage"))
            choice = (data.get("choices") or [{}])[0]
            message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
            proxy_calls, client_calls = self.split(message.get("tool_calls") or [])
            if not self.may_continue(proxy_calls, client_calls):
                break
            response = await self.continue_with(_assistant_echo(message), proxy_calls)
            data = completion_json(response)
        if proxy_calls:
            self.report_dropped(proxy_calls)
            _keep_client_calls(choice, message, client_calls)
        if self.rounds and usage_total:
            data["usage"] = {**(data.get("usage") or {}), **usage_total}
        return data


def _keep_client_calls(choice: dict[str, Any], message: dict[str, Any], client_calls: Calls) -> None:
    """Leave only the client's calls in the message; with none left, nothing announces a call."""
    if client_calls:
        message["tool_calls"] = client_calls
        return
    message.pop("tool_calls", None)
    if choice.get("finish_reason") == "tool_calls":
        choice["finish_reason"] = "stop"


def _assistant_echo(message: dict[str, Any]) -> dict[str, Any]:
    keep = {k: v for k, v in message.items() if k in ("role", "content", "tool_calls")}
    keep.setdefault("content", None)
    return keep


def add_usage(total: dict[str, int], usage: Any) -> None:
    """A round's token counts added to the rounds' (`usage` in any API's names: chat's prompt and
    completion, Responses' input and output, Anthropic's and its cache counts; nested details are
    left as the last round gave them)."""
    if isinstance(usage, dict):
        for key, value in usage.items():
            if isinstance(value, int) and not isinstance(value, bool) and key.endswith("tokens"):
                total[key] = total.get(key, 0) + value
