"""What the upstream answered, on its way to the client: the headers relayed with it, its errors
in the OpenAI shape (a later proxy-tool round's as the first round's would be), its JSON written back
as it came, and the JSON the proxy sends upstream."""

from __future__ import annotations

import json
from typing import Any

import httpx
from starlette.responses import JSONResponse, Response

from .errors import ProxyError, error_body
from .upstream.client import DROP_RESPONSE

RELAYED_UPSTREAM_HEADERS = ("x-request-id", "openai-processing-ms", "openai-version", "retry-after", "retry-after-ms")


def encode_json(body: dict[str, Any]) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def relay_headers(response: httpx.Response) -> dict[str, str]:
    return {k: v for k, v in response.headers.items() if k.lower() not in DROP_RESPONSE and not k.lower().startswith("x-ctxwarden-")}


class UpstreamJSON(JSONResponse):
    """JSON the upstream wrote: a lone surrogate escape in it (valid JSON, not valid UTF-8) is
    relayed as the same \\u escape instead of failing to encode."""

    def render(self, content: Any) -> bytes:
        try:
            return super().render(content)
        except UnicodeEncodeError:
            return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii")


async def relay_error(response: httpx.Response) -> Response:
    """The upstream's error with its status; a body that is not OpenAI-shaped gets wrapped."""
    data, headers = await upstream_error(response)
    return UpstreamJSON(data, status_code=response.status_code, headers=headers)


async def round_error(response: httpx.Response) -> ProxyError:
    """An upstream error in a later round of the proxy's tool rounds, relayed as the first round's
    would be: its status, its body and its retry-after."""
    data, headers = await upstream_error(response)
    detail = data["error"]
    return ProxyError(response.status_code, detail.get("code") or "upstream_error", detail.get("message") or "upstream error",
                      headers=headers, relayed=data)


async def upstream_error(response: httpx.Response) -> tuple[dict[str, Any], dict[str, str]]:
    """The upstream error's OpenAI-shaped body and the headers worth relaying with it."""
    try:
        content = await response.aread()
    except httpx.HTTPError as exc:  # a cut or undecodable error body: the status still says what happened
        content = f"(the body could not be read: {type(exc).__name__})".encode()
    finally:
        await response.aclose()
    headers = {k: v for k, v in response.headers.items() if k.lower() in RELAYED_UPSTREAM_HEADERS or k.lower().startswith("x-ratelimit")}
    try:
        data = json.loads(content)
    except ValueError:
        data = None
    if not (isinstance(data, dict) and isinstance(data.get("error"), dict)):
        text = content.decode("utf-8", errors="replace").strip()[:500] or response.reason_phrase
        data = error_body(f"The upstream answered {response.status_code}: {text}", "upstream_error", response.status_code)
    return data, headers
