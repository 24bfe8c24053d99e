"""The upstream client: one pooled httpx.AsyncClient, retries with backoff, behind the circuit breaker.

OpenAI-compatible upstreams get the body bytes as they are; nothing is re-encoded here.
Retries cover connect errors, 429 and 502-504 (retry-after honoured), and happen only before a
response has started, so a stream is never replayed half-way.
"""

from __future__ import annotations

import asyncio
import email.utils
import http.cookiejar
import json
import logging
import os
import re
import time
from dataclasses import dataclass
from typing import Any, Mapping

import httpx
import yarl

from ..config import UpstreamConfig
from ..errors import ProxyError
from .bounded import read_capped
from .breaker import CircuitBreaker
from .native import NativeSender

log = logging.getLogger("ctxwarden.upstream")

RETRY_STATUSES = {429, 502, 503, 504}
BREAKER_STATUSES = {500, 502, 503, 504}  # answers that count as a failure for the breaker
MAX_RETRY_AFTER_S = 20.0  # longer waits are relayed to the client instead of slept through

# Request headers never forwarded upstream: hop-by-hop, framing, the client's cookies, and our hints.
_DROP_REQUEST = {
    "host", "content-length", "connection", "keep-alive", "transfer-encoding", "te", "upgrade",
    "proxy-authorization", "proxy-connection", "accept-encoding", "expect", "cookie", "cookie2",
}
# A header whose name holds one of these carries a credential: the client's are never forwarded
# when the proxy authenticates itself (authorization, api-key, x-api-key, x-goog-api-key, x-auth-token, …).
_CREDENTIAL = re.compile(
    r"auth|api-key|api_key|apikey|token|secret|password|credential|subscription-key|access-key|functions-key"
)
_UNREACHABLE = (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError, httpx.ReadError)
# Response headers never relayed: hop-by-hop and framing (the body may be re-encoded).
DROP_RESPONSE = {"content-length", "transfer-encoding", "connection", "keep-alive", "content-encoding", "server", "date",
                 # …and what would act on the proxy's own origin (the dashboard is served from it) or its clients'
                 # connections: an upstream's cookie, site-data wipe, HSTS or alternative services are not the client's
                 "set-cookie", "set-cookie2", "clear-site-data", "strict-transport-security", "alt-svc"}


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    value = headers.get("retry-after-ms")
    if value:
        try:
            return float(value) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:  # an HTTP date; anything else (Python 3.10+ raises on it) is no hint at all
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, parsed.timestamp() - time.time()) if parsed else None


class _NoCookies(http.cookiejar.CookieJar):
    """A jar that keeps nothing: the client is shared by every tenant, so a cookie one answer sets
    must never ride along on anyone's next request."""

    def extract_cookies(self, response: Any, request: Any) -> None:
        return None

    def set_cookie(self, cookie: http.cookiejar.Cookie) -> None:
        return None


@dataclass
class UpstreamResponse:
    response: httpx.Response
    attempts: int


class Upstream:
    def __init__(self, config: UpstreamConfig, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.config = config
        self.base_url = config.base_url.rstrip("/")
        self.max_response_bytes = int(config.max_response_mb * 2**20)
        self._urls: dict[str, Any] = {}  # path → the client's URL object (httpx.URL or yarl.URL)
        self.breaker = CircuitBreaker(config.circuit_breaker.failure_threshold, config.circuit_breaker.cooldown_s)
        limits = httpx.Limits(max_connections=config.max_connections, max_keepalive_connections=config.max_connections)
        # aiohttp's own client, unless a test hands in an httpx transport (respx) or the config asks
        # for httpx; one of the two, never both.
        self.native: NativeSender | None = None
        self.client: httpx.AsyncClient | None = None
        if transport is None and config.http_client == "aiohttp":
            self.native = NativeSender(config.max_connections, limits.keepalive_expiry, config.timeout_s, config.connect_timeout_s,
                                       self.max_response_bytes)
        else:
            self.client = httpx.AsyncClient(
                timeout=httpx.Timeout(config.timeout_s, connect=config.connect_timeout_s),
                limits=limits,
                transport=transport,
                cookies=_NoCookies(),
            )
        self._parse_url = httpx.URL if self.client is not None else yarl.URL

    async def _httpx_send(self, request: httpx.Request, stream: bool) -> httpx.Response:
        """httpx's client, a plain answer read within the same bounds as aiohttp's (bounded.py)."""
        assert self.client is not None
        if stream:
            return await self.client.send(request, stream=True)
        try:
            async with asyncio.timeout(self.config.timeout_s):
                response = await self.client.send(request, stream=True)
                try:
                    body = await read_capped(response.aiter_bytes(), self.max_response_bytes)  # inflated chunk by chunk
                finally:
                    await response.aclose()
        except TimeoutError as exc:
            raise httpx.ReadTimeout(f"the upstream call took longer than {self.config.timeout_s} s", request=request) from exc
        headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in ("content-encoding", "content-length")]
        return httpx.Response(response.status_code, headers=headers, content=body, request=request)

    async def aclose(self) -> None:
        if self.native is not None:
            await self.native.aclose()
        if self.client is not None:
            await self.client.aclose()

    def _url(self, path: str) -> Any:
        """Parsed once per path: URL parsing is a measurable part of a pass-through."""
        url = self._urls.get(path)
        if url is None:
            url = self._parse_url(f"{self.base_url}/{path.lstrip('/')}")
            if len(self._urls) < 256:
                self._urls[path] = url
        return url

    def api_key(self) -> str | None:
        return os.environ.get(self.config.api_key_env) if self.config.api_key_env else None

    def _credential(self, key: str) -> dict[str, str]:
        """The header that carries our key: OpenAI-compatible servers read a bearer token."""
        return {"authorization": f"Bearer {key}"}

    def request_headers(self, client_headers: Mapping[str, str]) -> dict[str, str]:
        """The client's headers minus hop-by-hop ones, cookies and our hints. With a key of our own,
        no client credential at all and our key; without one, the client's credentials pass through."""
        key = self.api_key()
        out = {}
        for name, value in client_headers.items():
            lower = name.lower()
            if lower in _DROP_REQUEST or lower.startswith("x-ctxwarden-"):
                continue
            if key and _CREDENTIAL.search(lower):
                continue
            out[name] = value
        if key:
            out.update(self._credential(key))
        return out

    async def send(
        self,
        method: str,
        path: str,
        content: bytes | None,
        headers: Mapping[str, str],
        stream: bool = False,
    ) -> UpstreamResponse:
        """Send with retries; return the response (open, when `stream`; the caller closes it).

        Raises ProxyError(502/503/504) when the upstream cannot be reached or answers what cannot be read.
        """
        url = self._url(path)
        attempt = 0
        delay = self.config.backoff_s
        while True:
            attempt += 1
            trial = self.breaker.before_call()
            try:
                outcome = await self._attempt(method, url, content, headers, stream, attempt, delay)
            finally:
                if trial:  # however the trial ended, even by an exception nobody foresaw
                    self.breaker.end_trial()
            if isinstance(outcome, httpx.Response):
                return UpstreamResponse(outcome, attempt)
            await asyncio.sleep(outcome)
            delay *= 2

    async def _attempt(
        self, method: str, url: Any, content: bytes | None, headers: Mapping[str, str], stream: bool,
        attempt: int, delay: float,
    ) -> httpx.Response | float:
        """One call: the response to hand back, or the seconds to wait before the next attempt."""
        try:
            if self.native is not None:
                response = await self.native.send(method, url, content, headers, stream)
            else:
                request = self.client.build_request(method, url, content=content, headers=headers)
                response = await self._httpx_send(request, stream)
        except _UNREACHABLE as exc:
            self.breaker.failure()
            if attempt <= self.config.retries:
                log.info("upstream %s failed (%s); retry %d in %.2fs", url, type(exc).__name__, attempt, delay)
                return delay
            raise ProxyError(
                502,
                "upstream_unavailable",
                f"Could not reach the upstream at {self.base_url} after {attempt} attempt(s): {type(exc).__name__}.",
            ) from exc
        except httpx.TimeoutException as exc:
            self.breaker.failure()
            raise ProxyError(504, "upstream_timeout",
                             f"The upstream at {self.base_url} did not answer within {self.config.timeout_s:g}s.") from exc
        except ProxyError:  # an answer past its bounds or that does not inflate (bounded.py): the upstream's fault
            self.breaker.failure()
            raise
        except UnicodeEncodeError as exc:  # httpx sends header values as ASCII
            raise ProxyError(400, "invalid_request", "A request header holds a character that is not ASCII.") from exc
        except httpx.HTTPError as exc:
            if not isinstance(exc, (httpx.LocalProtocolError, httpx.UnsupportedProtocol)):
                self.breaker.failure()  # the upstream's fault (e.g. a body that cannot be decoded), not the request's
            raise ProxyError(
                502,
                "upstream_invalid_response",
                f"The exchange with the upstream at {self.base_url} failed: {type(exc).__name__}: {str(exc)[:200]}",
            ) from exc

        status = response.status_code
        if 300 <= status < 400:  # never followed nor relayed: a client's SDK would follow it and send its prompt there
            await response.aclose()
            self.breaker.failure()
            raise ProxyError(502, "upstream_invalid_response",
                             f"The upstream answered {status} (a redirect), which the proxy neither follows nor relays; "
                             "check upstream.base_url.")
        if status in BREAKER_STATUSES:
            self.breaker.failure()
        else:
            self.breaker.success()
        if status in RETRY_STATUSES and attempt <= self.config.retries:
            wait = retry_after_seconds(response.headers)
            if wait is None or wait <= MAX_RETRY_AFTER_S:
                await response.aclose()
                sleep_s = wait if wait is not None else delay
                log.info("upstream answered %d; retry %d in %.2fs", status, attempt, sleep_s)
                return sleep_s
        return response


def check_answer_bytes(response: httpx.Response) -> None:
    """What a plain answer relayed unread must be at least: a 200 whose body is a JSON object (its
    first byte, not a parse: the pass-through's cost stays what the bytes cost). An HTML page, a
    JSON array or a 204 is the ProxyError 502 that `completion_json` would raise."""
    status, body = response.status_code, response.content
    if status == 200 and body.lstrip()[:1] == b"{":
        return
    head = body[:80].decode("utf-8", errors="replace")
    raise ProxyError(502, "upstream_invalid_response",
                     f"The upstream answered {status} with a body that is not a JSON object: {head!r}")


def completion_json(response: httpx.Response) -> dict[str, Any]:
    """A chat completion's JSON; ProxyError 502 upstream_invalid_response naming what is wrong with it."""
    status = response.status_code
    try:
        data = json.loads(response.content)
    except ValueError as exc:
        head = response.content[:80].decode("utf-8", errors="replace")
        raise ProxyError(502, "upstream_invalid_response",
                         f"The upstream answered {status} with a body that is not valid JSON ({exc}): {head!r}") from exc
    if not isinstance(data, dict):
        raise ProxyError(502, "upstream_invalid_response",
                         f"The upstream answered {status} with JSON that is not a JSON object but a {type(data).__name__}.")
    choices = data.get("choices")
    if choices is not None and not (isinstance(choices, list) and all(isinstance(c, dict) for c in choices)):
        raise ProxyError(502, "upstream_invalid_response",
                         f"The upstream answered {status} with a completion whose 'choices' is not a list of objects.")
    return data


class AnthropicUpstream(Upstream):
    """Anthropic's Messages API (`upstream.anthropic`): the main upstream's pool, retries and
    breaker, its own base URL and key. The key goes in `x-api-key` (never a bearer token of another
    provider), and `anthropic-version` is added when the client sent none."""

    def __init__(self, config: UpstreamConfig, transport: httpx.AsyncBaseTransport | None = None) -> None:
        anthropic = config.anthropic
        assert anthropic.base_url is not None, "translated Messages requests use the main upstream"
        super().__init__(config.model_copy(update={"base_url": anthropic.base_url, "api_key_env": anthropic.api_key_env}),
                         transport=transport)
        self.version = anthropic.version

    def _credential(self, key: str) -> dict[str, str]:
        return {"x-api-key": key}

    def request_headers(self, client_headers: Mapping[str, str]) -> dict[str, str]:
        out = super().request_headers(client_headers)
        if not any(name.lower() == "anthropic-version" for name in out):
            out["anthropic-version"] = self.version
        return out
