"""The upstream client: one pooled httpx.AsyncClient, retries with backoff, behind the circuit breaker.

OpenAI-compatible upstreams get the body bytes as they are; nothing is re-encoded here.
Retries cover connect errors, 429 and 502-504 (retry-after honoured), and happen only before a
response has started, so a stream is never replayed half-way.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import os
import time
from dataclasses import dataclass
from typing import Mapping

import httpx

from ..config import UpstreamConfig
from ..errors import ProxyError
from .breaker import CircuitBreaker

log = logging.getLogger("ctxwarden.upstream")

RETRY_STATUSES = {429, 502, 503, 504}
BREAKER_STATUSES = {500, 502, 503, 504}  # answers that count as a failure for the breaker
MAX_RETRY_AFTER_S = 20.0  # longer waits are relayed to the client instead of slept through

# Request headers never forwarded upstream: hop-by-hop, framing, and our own hints.
_DROP_REQUEST = {
    "host", "content-length", "connection", "keep-alive", "transfer-encoding", "te", "upgrade",
    "proxy-authorization", "proxy-connection", "accept-encoding", "expect",
}
# Response headers never relayed: hop-by-hop and framing (the body may be re-encoded).
DROP_RESPONSE = {"content-length", "transfer-encoding", "connection", "keep-alive", "content-encoding", "server", "date"}


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
        parsed = email.utils.parsedate_to_datetime(value)
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


@dataclass
class UpstreamResponse:
    response: httpx.Response
    attempts: int


class Upstream:
    def __init__(self, config: UpstreamConfig, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.config = config
        self.base_url = config.base_url.rstrip("/")
        self._urls: dict[str, httpx.URL] = {}
        self.breaker = CircuitBreaker(config.circuit_breaker.failure_threshold, config.circuit_breaker.cooldown_s)
        self.client = httpx.AsyncClient(
            timeout=httpx.Timeout(config.timeout_s, connect=config.connect_timeout_s),
            limits=httpx.Limits(max_connections=config.max_connections, max_keepalive_connections=config.max_connections),
            transport=transport,
        )

    async def aclose(self) -> None:
        await self.client.aclose()

    def _url(self, path: str) -> httpx.URL:
        """Parsed once per path: httpx's URL parsing is a measurable part of a pass-through."""
        url = self._urls.get(path)
        if url is None:
            url = httpx.URL(f"{self.base_url}/{path.lstrip('/')}")
            if len(self._urls) < 256:
                self._urls[path] = url
        return url

    def api_key(self) -> str | None:
        return os.environ.get(self.config.api_key_env) if self.config.api_key_env else None

    def request_headers(self, client_headers: Mapping[str, str]) -> dict[str, str]:
        """The client's headers minus hop-by-hop ones and our hints; our key if one is configured."""
        out = {
            k: v for k, v in client_headers.items()
            if k.lower() not in _DROP_REQUEST and not k.lower().startswith("x-ctxwarden-")
        }
        key = self.api_key()
        if key:
            out = {k: v for k, v in out.items() if k.lower() != "authorization"}
            out["authorization"] = f"Bearer {key}"
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

        Raises ProxyError(502/503/504) when the upstream cannot be reached.
        """
        url = self._url(path)
        attempt = 0
        delay = self.config.backoff_s
        while True:
            attempt += 1
            self.breaker.before_call()
            request = self.client.build_request(method, url, content=content, headers=headers)
            try:
                response = await self.client.send(request, stream=stream)
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError, httpx.ReadError) as exc:
                self.breaker.failure()
                if attempt <= self.config.retries:
                    log.info("upstream %s failed (%s); retry %d in %.2fs", url, type(exc).__name__, attempt, delay)
                    await asyncio.sleep(delay)
                    delay *= 2
                    continue
                raise ProxyError(
                    502,
                    "upstream_unavailable",
                    f"Could not reach the upstream at {self.base_url} after {attempt} attempt(s): {type(exc).__name__}.",
                ) from exc
            except httpx.TimeoutException as exc:
                self.breaker.failure()
                raise ProxyError(
                    504,
                    "upstream_timeout",
                    f"The upstream at {self.base_url} did not answer within {self.config.timeout_s:g}s.",
                ) from exc

            status = response.status_code
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
                    await asyncio.sleep(sleep_s)
                    delay *= 2
                    continue
            return UpstreamResponse(response, attempt)
