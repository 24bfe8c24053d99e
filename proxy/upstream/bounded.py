"""A plain (not streamed) upstream answer read whole, within bounds: its size, compressed and
decompressed (`upstream.max_response_mb`), and its time (`upstream.timeout_s` for the whole call,
not per read: an upstream that trickles a byte every few seconds never finishes a call otherwise).

Why here: a hostile or broken upstream's 1 MB gzip body that inflates to 1 GB took the proxy from
0.6 to 2.5 GB and stalled the event loop for 5 s (httpx inflates a whole body at once); a 100 MB
answer stayed resident. Past a bound the call is a 502 `upstream_response_too_large`, the
connection is dropped, and nothing more is read. A stream is bounded by its relay instead (each
event as it comes; the longest gap between chunks is `timeout_s`).
"""

from __future__ import annotations

import asyncio
import zlib
from typing import AsyncIterator

from ..errors import ProxyError

THREAD_BYTES = 256 * 1024  # compressed bodies bigger than this are inflated off the event loop


def too_large(limit: int) -> ProxyError:
    return ProxyError(502, "upstream_response_too_large",
                      f"The upstream's answer is bigger than {limit // 2**20} MB (upstream.max_response_mb); "
                      "it was not read to its end.")


async def read_capped(chunks: AsyncIterator[bytes], limit: int) -> bytes:
    """The chunks joined, or ProxyError once they pass `limit` bytes."""
    parts, total = [], 0
    async for chunk in chunks:
        total += len(chunk)
        if total > limit:
            raise too_large(limit)
        parts.append(chunk)
    return b"".join(parts)


def _inflate(body: bytes, encoding: str, limit: int) -> bytes:
    """gzip or deflate (zlib-wrapped or raw) inflated to at most `limit` bytes."""
    candidates = (16 + zlib.MAX_WBITS,) if encoding == "gzip" else (zlib.MAX_WBITS, -zlib.MAX_WBITS)
    for wbits in candidates:
        inflater = zlib.decompressobj(wbits)
        try:
            out = inflater.decompress(body, limit + 1)
        except zlib.error:
            if wbits == candidates[-1]:
                raise ProxyError(502, "upstream_invalid_response",
                                 f"The upstream's answer says it is {encoding}-encoded but does not inflate.") from None
            continue
        if len(out) > limit or inflater.unconsumed_tail:
            raise too_large(limit)
        return out
    raise AssertionError("unreachable")


async def decoded(body: bytes, encoding: str | None, limit: int) -> tuple[bytes, bool]:
    """(the body inflated when it is gzip or deflate, whether it was). Other encodings are left to httpx."""
    encoding = (encoding or "").strip().lower()
    if encoding not in ("gzip", "deflate") or not body:
        return body, False
    if len(body) > THREAD_BYTES:
        return await asyncio.to_thread(_inflate, body, encoding, limit), True
    return _inflate(body, encoding, limit), True
