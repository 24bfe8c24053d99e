"""Providers that do not speak OpenAI's API ("anthropic/…", "bedrock/…"), through litellm.

The answer is handed back as an httpx.Response carrying OpenAI's JSON or SSE, so the rest of
the proxy (validation, streaming relay, recall rounds) treats every upstream alike.
"""

from __future__ import annotations

import json
import os
from typing import Any, AsyncIterator

import httpx

from ..errors import ProxyError


def _litellm():
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.disable_aiohttp_transport = True  # httpx underneath: visible to respx, one transport stack
    return litellm


async def litellm_response(body: dict[str, Any], stream: bool) -> httpx.Response:
    litellm = _litellm()
    try:
        result = await litellm.acompletion(**body)
    except Exception as exc:  # litellm maps provider errors to OpenAI's classes, with status_code
        status = int(getattr(exc, "status_code", 502) or 502)
        raise ProxyError(status, "upstream_error", f"{body.get('model')}: {getattr(exc, 'message', str(exc))}") from exc
    if not stream:
        return httpx.Response(200, json=result.model_dump(exclude_none=True))

    async def events() -> AsyncIterator[bytes]:
        async for chunk in result:
            yield b"data: " + json.dumps(chunk.model_dump(exclude_none=True)).encode() + b"\n\n"
        yield b"data: [DONE]\n\n"

    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=events())
