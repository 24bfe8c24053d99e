"""Calls to the upstream on aiohttp's own client, answered as httpx.Response objects.

httpx's client layers (request building, auth and redirect hooks, the transport adapter) cost
about 0.1 ms of a 0.3 ms round trip on a pooled connection, as much as the rest of the proxy with
its policies off (measured with bench/upstream_client.py). This sender skips them. What it hands
back is an httpx.Response, and what it raises are httpx's exceptions, so every caller (retries,
the breaker, the stream relay, the error mapping) is the same for both clients.

The body is not decompressed here (auto_decompress=False): httpx decodes it from the response's
headers, as it does on its own client.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import AsyncIterator, Iterator, Mapping

import aiohttp
import httpx
import yarl

from .bounded import decoded, read_capped

# aiohttp's exceptions as httpx's (most specific first), so callers handle one family.
_EXCEPTIONS: tuple[tuple[type[BaseException], type[httpx.HTTPError]], ...] = (
    (aiohttp.ConnectionTimeoutError, httpx.ConnectTimeout),
    (aiohttp.SocketTimeoutError, httpx.ReadTimeout),
    (aiohttp.ServerTimeoutError, httpx.ReadTimeout),
    (aiohttp.ClientConnectorError, httpx.ConnectError),
    (aiohttp.ServerDisconnectedError, httpx.RemoteProtocolError),
    (aiohttp.ClientPayloadError, httpx.ReadError),
    (aiohttp.ClientResponseError, httpx.RemoteProtocolError),  # a response that is not HTTP
    (aiohttp.InvalidURL, httpx.UnsupportedProtocol),
    (aiohttp.ClientConnectionError, httpx.ReadError),
    (TimeoutError, httpx.ReadTimeout),
)


@contextlib.contextmanager
def as_httpx_errors() -> Iterator[None]:
    try:
        yield
    except httpx.HTTPError:
        raise
    except Exception as exc:
        for source, target in _EXCEPTIONS:
            if isinstance(exc, source):
                raise target(f"{type(exc).__name__}: {exc}") from exc
        raise


class _Body(httpx.AsyncByteStream):
    """A streamed response's body, read as it arrives; closing it gives the connection back (or
    drops it, when the body was not read to its end)."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with as_httpx_errors():
            async for chunk in self._response.content.iter_any():
                yield chunk

    async def aclose(self) -> None:
        self._response.release()


class NativeSender:
    """One aiohttp session (its connection pool), made on first use inside the running loop."""

    def __init__(self, max_connections: int, keepalive_s: float | None, timeout_s: float, connect_timeout_s: float,
                 max_response_bytes: int = 64 * 2**20) -> None:
        self._max_connections = max_connections
        self._call_timeout_s = timeout_s  # a plain call's whole time (bounded.py)
        self._max_response_bytes = max_response_bytes
        self._keepalive_s = keepalive_s
        # As httpx's Timeout(timeout_s, connect=…): each read may wait timeout_s; no limit on the whole.
        self._timeout = aiohttp.ClientTimeout(total=None, connect=timeout_s, sock_connect=connect_timeout_s,
                                              sock_read=timeout_s)
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self._max_connections, keepalive_timeout=self._keepalive_s)
            self._session = aiohttp.ClientSession(
                connector=connector,
                cookie_jar=aiohttp.DummyCookieJar(),  # shared by every tenant: keep no cookie
                timeout=self._timeout,
                auto_decompress=False,
                skip_auto_headers=("Content-Type",),  # a body goes with the client's content type, or none
                # What httpx decodes whatever else is installed; aiohttp would offer more (br, zstd).
                headers={"Accept-Encoding": "gzip, deflate"},
            )
        return self._session

    async def send(self, method: str, url: yarl.URL, content: bytes | None, headers: Mapping[str, str],
                   stream: bool) -> httpx.Response:
        for value in headers.values():
            value.encode("ascii")  # as httpx: a header that is not ASCII is the request's fault (UnicodeEncodeError)
        with as_httpx_errors():
            if stream:
                response = await self._client().request(method, url, data=content, headers=headers, allow_redirects=False)
                return httpx.Response(response.status, headers=response.raw_headers, stream=_Body(response))
            async with asyncio.timeout(self._call_timeout_s):
                response = await self._client().request(method, url, data=content, headers=headers, allow_redirects=False)
                try:
                    body = await read_capped(response.content.iter_any(), self._max_response_bytes)
                except BaseException:
                    response.close()  # not read to its end: the connection is not reused
                    raise
                response.release()
        body, inflated = await decoded(body, response.headers.get("content-encoding"), self._max_response_bytes)
        raw_headers = response.raw_headers
        if inflated:
            raw_headers = tuple((k, v) for k, v in raw_headers if k.lower() not in (b"content-encoding", b"content-length"))
        return httpx.Response(response.status, headers=raw_headers, content=body)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
