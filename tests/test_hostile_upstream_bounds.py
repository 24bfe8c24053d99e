"""A hostile or broken upstream, through the real server, on both HTTP clients: a plain answer is
read within its bounds (size, inflated size, the call's whole time), a redirect is neither followed
nor relayed, an unread pass-through answer must at least be a JSON object, an upstream's cookies
never reach the client, and a Retry-After nobody can read is no 500. The proxy answers the next
request as usual after each."""

from __future__ import annotations

import asyncio
import gzip
import json
import time

import httpx
import pytest
from starlette.responses import JSONResponse, Response, StreamingResponse

from tests.conftest import policies_off

HI = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
ANSWER = {"id": "x", "object": "chat.completion", "created": 1, "model": "gpt-4o",
          "choices": [{"index": 0, "message": {"role": "assistant", "content": "fine"}, "finish_reason": "stop"}]}
CLIENTS = ["aiohttp", "httpx"]


def scripted(*replies):
    """An upstream answering each request with the next reply (a function → Response), then fine answers."""
    queue = list(replies)

    async def handler(request):
        await request.body()
        return queue.pop(0)() if queue else JSONResponse(ANSWER)
    return handler


def behind(start_proxy, hostile, handler, client: str, **upstream):
    server = hostile(handler)
    return start_proxy({"policies": policies_off(),
                        "upstream": {"base_url": f"{server.url}/v1", "http_client": client, "retries": 0, **upstream}})


def post(proxy) -> httpx.Response:
    return httpx.post(f"{proxy.url}/v1/chat/completions", json=HI, timeout=30)


def still_fine(proxy) -> None:
    r = post(proxy)
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "fine"


@pytest.mark.parametrize("client", CLIENTS)
def test_a_gzip_bomb_is_a_502_not_a_gigabyte(start_proxy, hostile, client):
    bomb = gzip.compress(b'{"id": "' + b"0" * (40 * 2**20) + b'"}')  # 40 MB of JSON in ~40 KB
    proxy = behind(start_proxy, hostile, scripted(lambda: Response(bomb, media_type="application/json",
                                                                   headers={"content-encoding": "gzip"})),
                   client, max_response_mb=4)
    r = post(proxy)
    assert r.status_code == 502, r.text
    assert r.json()["error"]["code"] == "upstream_response_too_large"
    still_fine(proxy)


@pytest.mark.parametrize("client", CLIENTS)
def test_an_answer_past_the_size_bound_is_a_502_and_one_within_it_is_relayed(start_proxy, hostile, client):
    big = {**ANSWER, "padding": "x" * (3 * 2**20)}
    proxy = behind(start_proxy, hostile, scripted(lambda: JSONResponse(big), lambda: JSONResponse({**ANSWER, "padding": "x" * 2**20})),
                   client, max_response_mb=2)
    r = post(proxy)
    assert r.status_code == 502 and r.json()["error"]["code"] == "upstream_response_too_large"
    assert post(proxy).json()["padding"] == "x" * 2**20  # 1 MB: within the bound, relayed whole
    still_fine(proxy)


@pytest.mark.parametrize("client", CLIENTS)
def test_an_answer_that_trickles_ends_at_the_calls_timeout(start_proxy, hostile, client):
    async def trickle():
        for byte in json.dumps(ANSWER).encode():
            yield bytes([byte])
            await asyncio.sleep(0.3)  # each gap within the timeout, the whole call far past it

    proxy = behind(start_proxy, hostile, scripted(lambda: StreamingResponse(trickle(), media_type="application/json")),
                   client, timeout_s=1.5)
    started = time.monotonic()
    r = post(proxy)
    assert r.status_code == 504 and r.json()["error"]["code"] == "upstream_timeout"
    assert time.monotonic() - started < 6
    still_fine(proxy)


@pytest.mark.parametrize("client", CLIENTS)
def test_a_redirect_is_neither_followed_nor_relayed(start_proxy, hostile, client):
    seen = []

    async def handler(request):
        seen.append(request.url.path)
        return Response(status_code=307, headers={"location": "http://127.0.0.1:9/steal"})
    proxy = behind(start_proxy, hostile, handler, client)
    r = post(proxy)
    assert r.status_code == 502 and r.json()["error"]["code"] == "upstream_invalid_response"
    assert "location" not in r.headers and "redirect" in r.json()["error"]["message"]
    assert seen == ["/v1/chat/completions"]


@pytest.mark.parametrize("reply", [
    lambda: Response("<html><body>Gateway login</body></html>", media_type="text/html"),
    lambda: JSONResponse([1, 2, 3]),
    lambda: Response(status_code=204),
], ids=["html", "array", "204"])
def test_an_unread_answer_that_is_no_json_object_is_a_502(start_proxy, hostile, reply):
    proxy = behind(start_proxy, hostile, scripted(reply), "aiohttp")  # every policy off: nothing reads the answer
    r = post(proxy)
    assert r.status_code == 502 and r.json()["error"]["code"] == "upstream_invalid_response"
    still_fine(proxy)


def test_an_upstreams_cookies_never_reach_the_client(start_proxy, hostile):
    proxy = behind(start_proxy, hostile, scripted(lambda: JSONResponse(ANSWER, headers={
        "set-cookie": "ctxwarden_dashboard=attacker; Path=/", "clear-site-data": '"*"', "x-request-id": "req_1"})), "aiohttp")
    r = post(proxy)
    assert r.status_code == 200
    assert "set-cookie" not in r.headers and "clear-site-data" not in r.headers
    assert r.headers["x-request-id"] == "req_1"  # what is the client's to see still is


@pytest.mark.parametrize("client", CLIENTS)
def test_a_retry_after_nobody_can_read_is_relayed_not_a_500(start_proxy, hostile, client):
    limited = lambda: JSONResponse({"error": {"message": "slow down", "type": "rate_limit_error", "code": None, "param": None}},  # noqa: E731
                                   status_code=429, headers={"retry-after": "soon-ish"})
    proxy = behind(start_proxy, hostile, scripted(limited, limited), client, retries=1, backoff_s=0.01)
    r = post(proxy)
    assert r.status_code == 429 and r.json()["error"]["message"] == "slow down"
    still_fine(proxy)


@pytest.mark.parametrize("client", CLIENTS)
def test_a_relayed_answer_streams_through_whatever_its_size(start_proxy, hostile, client):
    """The bound is for the answers the proxy reads: a file's content passes as it comes, inflated."""
    content = bytes(range(256)) * (12 * 2**12)  # 3 MB
    proxy = behind(start_proxy, hostile, scripted(lambda: Response(gzip.compress(content), media_type="application/octet-stream",
                                                                   headers={"content-encoding": "gzip"})),
                   client, max_response_mb=2)
    r = httpx.get(f"{proxy.url}/v1/files/file-1/content", timeout=30)
    assert r.status_code == 200 and r.content == content
    still_fine(proxy)
