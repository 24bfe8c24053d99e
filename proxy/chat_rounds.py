"""The chat handler's proxy-tool rounds: how a later round asks the upstream, and its telemetry.

Every round is a call of its own: a CLIENT span, the GenAI metrics and the key's charge, each with
that round's usage (OpenTelemetry's GenAI conventions: one span per model call). A plain round's
call ends when its answer is read. A streamed round's ends when the relay reaches the end of that
round (`ProxyToolRounds.end_round`, with the usage the round reported and the model it named); the
last one's when the stream ends (ChatHandler._stream). The client still sees one answer whose
usage is the sum over the rounds.
"""

from __future__ import annotations

from typing import Any

import httpx

from ctxwarden.policies.base import Exchange

from .genai import UpstreamCall, provider_name
from .models import uses_litellm
from .proxy_tools import ProxyToolRounds
from .upstream.client import completion_json
from .upstream_answer import encode_json, round_error


def chat_rounds(handler: Any, ex: Exchange, stream: bool,
                first: tuple[UpstreamCall, int] | None = None) -> ProxyToolRounds:
    """The rounds of `ex` for the chat handler; `first`: a stream's first call and its status."""

    async def ask_again(body: dict[str, Any]) -> httpx.Response:
        if uses_litellm(ex.model):  # the next round goes where the first went
            from .upstream.providers import litellm_response

            return await litellm_response(body, stream)
        call = UpstreamCall(handler.telemetry, ex.model, provider_name(ex.model, False), handler.upstream.base_url,
                            tally=ex.notes.usage)
        result = await handler.upstream.send("POST", "chat/completions", encode_json(body), ex.notes.upstream_headers,
                                             stream=stream)
        response = result.response
        if response.status_code >= 400:
            call.finish(response.status_code)
            raise await round_error(response)
        if stream:
            rounds.in_flight = (call, response.status_code)  # ended by the relay at the round's end
        else:
            data = completion_json(response)
            call.finish(response.status_code, data.get("usage"), data.get("model"))
        return response

    rounds = ProxyToolRounds(ex, handler.max_rounds, ask_again)
    rounds.in_flight = first
    return rounds
