"""Providers that do not speak OpenAI's API ("anthropic/…", "bedrock/…"), through litellm.

The answer is handed back as an httpx.Response carrying OpenAI's JSON or SSE, so the rest of
the proxy (validation, streaming relay, recall rounds) treats every upstream alike.

Only OpenAI's chat parameters reach litellm: its own (api_base, api_key, headers, mock_response,
aws_*, …) would let a client send the call, and the provider key with it, anywhere. Any failure
of the library (a provider error, an unreachable provider, a missing optional module, a bug)
becomes a ProxyError with a one-line message: 4xx statuses the provider gave are kept, timeouts
are 504, everything else is 502.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
from typing import Any, AsyncIterator

import httpx

from ..errors import ProxyError

log = logging.getLogger("ctxwarden.upstream")

# OpenAI's chat-completion request fields (and `thinking`, which litellm maps for Anthropic).
CHAT_PARAMS = frozenset({
    "model", "messages", "audio", "frequency_penalty", "function_call", "functions", "logit_bias", "logprobs",
    "max_completion_tokens", "max_tokens", "metadata", "modalities", "n", "parallel_tool_calls", "prediction",
    "presence_penalty", "prompt_cache_key", "reasoning_effort", "response_format", "safety_identifier", "seed",
    "service_tier", "stop", "store", "stream", "stream_options", "temperature", "thinking", "tool_choice", "tools",
    "top_logprobs", "top_p", "user", "verbosity", "web_search_options",
})
_UNREACHABLE = (httpx.ConnectError, httpx.ConnectTimeout, ConnectionError)


def _litellm():
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.disable_aiohttp_transport = True  # httpx underneath: visible to respx, one transport stack
    litellm.suppress_debug_info = True  # no banners on stdout
    return litellm


def _call_args(body: dict[str, Any]) -> dict[str, Any]:
    args = {k: v for k, v in body.items() if k in CHAT_PARAMS}
    if body.get("tools") and importlib.util.find_spec("litellm.responses.mcp.chat_completions_handler"):
        # litellm's MCP gateway (for tools naming an MCP server) is imported for any request with tools
        # and needs the `mcp` package; the client's tools are plain functions: skip it, as litellm does itself.
        args["_skip_mcp_handler"] = True
    return args


async def litellm_response(body: dict[str, Any], stream: bool) -> httpx.Response:
    try:
        litellm = _litellm()
        result = await litellm.acompletion(**_call_args(body))
        if not stream:
            return httpx.Response(200, json=result.model_dump(exclude_none=True))
    except Exception as exc:
        raise provider_error(body.get("model"), exc) from exc

    async def events() -> AsyncIterator[bytes]:
        try:
            async for chunk in result:
                yield b"data: " + json.dumps(chunk.model_dump(exclude_none=True)).encode() + b"\n\n"
        except Exception as exc:
            raise provider_error(body.get("model"), exc) from exc
        yield b"data: [DONE]\n\n"

    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=events())


def provider_error(model: Any, exc: Exception) -> ProxyError:
    """The ProxyError for a failed provider call, with the first line of what went wrong."""
    chain = _causes(exc)
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    text = str(getattr(exc, "message", None) or exc).strip().splitlines()
    detail = f"{type(exc).__name__}: {text[0][:300] if text else ''}"
    if any(isinstance(c, (httpx.TimeoutException, TimeoutError)) for c in chain) or status == 408:
        return ProxyError(504, "upstream_timeout", f"{model}: the provider did not answer in time ({detail})")
    if any(isinstance(c, _UNREACHABLE) for c in chain):
        return ProxyError(502, "upstream_unavailable", f"{model}: could not reach the provider ({detail})")
    if status is not None and 400 <= status < 500:
        return ProxyError(status, "upstream_error", f"{model}: {text[0][:500] if text else detail}")
    root = chain[-1]
    if root is not exc and isinstance(root, ImportError):
        detail += f" (caused by {type(root).__name__}: {str(root).splitlines()[0][:200] if str(root) else ''})"
    unforeseen = not type(exc).__module__.startswith("litellm")  # not one of litellm's mapped errors: a traceback helps
    log.warning("the provider call for %s failed: %s", model, detail, exc_info=exc if unforeseen else None)
    return ProxyError(502, "upstream_error", f"{model}: the provider call failed: {detail}")


def _causes(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain and len(chain) < 10:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain
