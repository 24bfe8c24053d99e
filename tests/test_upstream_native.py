"""The upstream client on aiohttp's own session (upstream.http_client: aiohttp, the default): what
reaches the upstream and what comes back is what httpx's client would send and return, through the
real server, in front of small local upstreams."""

from __future__ import annotations

import asyncio
import gzip
import json
import socket
import threading

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from ctxwarden.proxy.config import UpstreamConfig
from ctxwarden.proxy.upstream.client import Upstream
from tests.conftest import policies_off

HI = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
ANSWER = {"id": "c1", "object": "chat.completion", "created": 1, "model": "gpt-4o",
          "choices": [{"index": 0, "message": {"role": "assistant", "content": "hello there"}, "finish_reason": "stop"}]}


def behind(start_proxy, upstream, client: str = "aiohttp"):
    return start_proxy({"policies": policies_off(), "upstream": {"base_url": f"{upstream.url}/v1", "http_client": client}})


@pytest.mark.parametrize("client", ["aiohttp", "httpx"])
def test_a_gzipped_answer_is_decoded_once(start_proxy, hostile, client):
    async def handler(request: Request) -> Response:
        return Response(gzip.compress(json.dumps(ANSWER).encode()), media_type="application/json",
                        headers={"content-encoding": "gzip"})

    proxy = behind(start_proxy, hostile(handler), client)
    r = httpx.post(f"{proxy.url}/v1/chat/completions", json=HI)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] == "hello there"


@pytest.mark.parametrize("client", ["aiohttp", "httpx"])
def test_the_upstream_sees_the_clients_content_type_and_no_other(start_proxy, hostile, client):
    seen: list[dict[str, str]] = []

    async def handler(request: Request) -> Response:
        seen.append({k: v for k, v in request.headers.items()})
        return Response(json.dumps(ANSWER), media_type="application/json")

    proxy = behind(start_proxy, hostile(handler), client)
    body = json.dumps(HI).encode()
    assert httpx.post(f"{proxy.url}/v1/chat/completions", content=body,
                      headers={"content-type": "application/json"}).status_code == 200
    # Without a content type the proxy reads the JSON all the same, and invents none for the upstream.
    assert httpx.post(f"{proxy.url}/v1/chat/completions", content=body).status_code == 200
    assert seen[0]["content-type"] == "application/json"
    assert "content-type" not in seen[1]
    assert seen[0]["accept-encoding"] == "gzip, deflate" if client == "aiohttp" else "gzip" in seen[0]["accept-encoding"]


def test_a_stream_the_client_leaves_gives_its_connection_back(start_proxy, hostile):
    """A client that stops reading half-way: the proxy stops reading too, and the next request works."""
    async def handler(request: Request) -> Response:
        async def events():
            for i in range(200):
                yield f'data: {{"choices":[{{"index":0,"delta":{{"content":"w{i} "}}}}]}}\n\n'.encode()
                await asyncio.sleep(0.01)
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    proxy = behind(start_proxy, hostile(handler))
    with httpx.stream("POST", f"{proxy.url}/v1/chat/completions", json={**HI, "stream": True}) as r:
        first = next(r.iter_lines())
    assert first.startswith("data: ")
    with httpx.stream("POST", f"{proxy.url}/v1/chat/completions", json={**HI, "stream": True}) as r:
        text = "".join(r.iter_text())
    assert r.status_code == 200 and "w199" in text and text.rstrip().endswith("[DONE]")


def _silent_server() -> tuple[socket.socket, str]:
    """A listener that accepts and then never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(sock.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    return sock, f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


@pytest.mark.parametrize("client", ["aiohttp", "httpx"])
async def test_an_upstream_that_never_answers_is_a_504_after_the_timeout(client):
    sock, url = _silent_server()
    upstream = Upstream(UpstreamConfig(base_url=url, http_client=client, api_key_env=None, timeout_s=0.3, retries=0))
    try:
        with pytest.raises(Exception) as caught:
            await upstream.send("POST", "chat/completions", json.dumps(HI).encode(), {"content-type": "application/json"})
        assert getattr(caught.value, "status", None) == 504 and caught.value.code == "upstream_timeout"
    finally:
        await upstream.aclose()
        sock.close()


@pytest.mark.parametrize("client", ["aiohttp", "httpx"])
async def test_a_refused_connection_is_retried_then_a_502(client):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    upstream = Upstream(UpstreamConfig(base_url=f"http://127.0.0.1:{port}/v1", http_client=client, api_key_env=None,
                                       retries=2, backoff_s=0.001))
    try:
        with pytest.raises(Exception) as caught:
            await upstream.send("POST", "chat/completions", b"{}", {"content-type": "application/json"})
        assert caught.value.status == 502 and caught.value.code == "upstream_unavailable"
        assert "after 3 attempt(s)" in caught.value.message
    finally:
        await upstream.aclose()
