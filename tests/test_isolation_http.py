"""HTTP-level isolation (issue 13, A.11 and B): keep-alive connections survive errors, the
catch-all /v1 relay cannot be walked out of, client credentials never reach the upstream when the
proxy authenticates itself. Raw sockets where a client library would normalise the request."""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from ctxwarden.proxy import chat as chat_module
from ctxwarden.proxy.local_server import free_port
from ctxwarden.proxy.upstream.client import Upstream
from tests.conftest import openai_client, policies_off

HI = [{"role": "user", "content": "hi"}]
CHAT = json.dumps({"model": "gpt-4o", "messages": HI}).encode()


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class RawConnection:
    """One HTTP/1.1 keep-alive connection; the request target is sent exactly as given."""

    def __init__(self, url: str) -> None:
        host, port = url.removeprefix("http://").split(":")
        self.host = f"{host}:{port}"
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.buf = b""

    def close(self) -> None:
        self.sock.close()

    def request(self, method: str, target: str, body: bytes = b"", headers: dict[str, str] | None = None) -> RawResponse:
        head = [f"{method} {target} HTTP/1.1", f"host: {self.host}"]
        head += [f"{k}: {v}" for k, v in (headers or {}).items()]
        if body or method == "POST":
            head += ["content-type: application/json", f"content-length: {len(body)}"]
        self.sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
        return self._response()

    def _recv(self) -> None:
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("the server closed the connection")
        self.buf += data

    def _take(self, n: int) -> bytes:
        while len(self.buf) < n:
            self._recv()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            self._recv()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _response(self) -> RawResponse:
        status = int(self._line().split()[1])
        headers: dict[str, str] = {}
        while line := self._line():
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        if "content-length" in headers:
            return RawResponse(status, headers, self._take(int(headers["content-length"])))
        body = b""
        while size := int(self._line(), 16):  # chunked
            body += self._take(size)
            self._take(2)
        self._line()
        return RawResponse(status, headers, body)


# ---------------------------------------------------------------------- 11. keep-alive after errors


def _boom(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("a bug in a handler")


ERRORS = {
    "unexpected exception": ("POST", "/v1/chat/completions", CHAT, 500),
    "bad JSON": ("POST", "/v1/chat/completions", b"{nope", 400),
    "unknown route": ("GET", "/nope", b"", 404),
    "wrong method": ("GET", "/v1/chat/completions", b"", 405),
    "body too large": ("POST", "/v1/chat/completions", b'{"model": "gpt-4o", "messages": "' + b"x" * 20000 + b'"}', 413),
    "upstream unreachable": ("POST", "/v1/chat/completions", CHAT, 502),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_after_an_error_the_connection_stays_usable_or_says_close(fake, start_proxy, monkeypatch, case):
    method, target, body, status = ERRORS[case]
    overrides: dict[str, Any] = {"policies": policies_off(), "server": {"max_body_mb": 0.01}}
    if case == "upstream unreachable":
        overrides["upstream"] = {"base_url": f"http://127.0.0.1:{free_port()}/v1"}
    if case == "unexpected exception":
        monkeypatch.setattr(chat_module.ChatHandler, "_handle", _boom)
    proxy = start_proxy(overrides)
    conn = RawConnection(proxy.url)
    try:
        first = conn.request(method, target, body)
        assert first.status == status
        assert "error" in first.json() and first.json()["error"]["message"]
        if first.headers.get("connection", "").lower() == "close":
            return  # said so: the client opens a new connection
        for _ in range(2):
            again = conn.request("GET", "/healthz")
            assert again.status == 200 and again.json()["status"] == "ok"
    finally:
        conn.close()


def test_an_unexpected_exception_is_an_openai_shaped_500(fake, start_proxy, monkeypatch):
    monkeypatch.setattr(chat_module.ChatHandler, "_handle", _boom)
    proxy = start_proxy({"policies": policies_off()})
    with httpx.Client() as client:
        for _ in range(3):  # httpx reuses the connection: each request must find it usable
            r = client.post(f"{proxy.url}/v1/chat/completions", json={"model": "gpt-4o", "messages": HI})
            assert r.status_code == 500
            assert r.json()["error"]["code"] == "internal_error" and "RuntimeError" in r.json()["error"]["message"]


def test_a_header_httpx_cannot_send_is_a_400_not_a_500(fake, start_proxy):
    proxy = start_proxy({"policies": policies_off()})
    conn = RawConnection(proxy.url)
    try:
        r = conn.request("POST", "/v1/chat/completions", CHAT, headers={"x-note": "caf\xe9"})
        assert r.status == 400 and r.json()["error"]["code"] == "invalid_request"
        assert conn.request("GET", "/healthz").status == 200
    finally:
        conn.close()
    assert fake.chat_requests == []


# ---------------------------------------------------------------------- 13. the catch-all relay stays in /v1

TRAVERSALS = [
    "/v1/../x", "/v1/%2e%2e/x", "/v1/%2E%2E/", "/v1/..%2fx", "/v1/..%2Fx", "/v1/./../x", "/v1/models/../../x",
    "/v1/%252e%252e/x", "/v1/%252e%252e%252fx", "/v1/..%5cx", "/v1/..\\x", "/v1/.%2e/x", "/v1/%2e./x",
    "/v1/..;/x", "/v1/models/..", "/v1/.", "/v1//x", "/v1/%2fx", "/v1/models%00", "/v1/%2e%2e%2f%2e%2e%2fx",
]


@pytest.mark.parametrize("target", TRAVERSALS)
def test_paths_that_leave_v1_are_refused_and_never_reach_the_upstream(fake, start_proxy, target):
    proxy = start_proxy({"policies": policies_off()})
    conn = RawConnection(proxy.url)
    try:
        r = conn.request("GET", target)
    except ConnectionError:
        r = None  # refused by the HTTP parser itself: fine, as long as nothing was relayed
    finally:
        conn.close()
    if r is not None:
        assert r.status in (400, 404), (target, r.status, r.body)
        if r.headers.get("content-type", "").startswith("application/json"):
            assert r.json()["error"]["code"] in ("invalid_path", "not_found")
    assert fake.paths == [], f"{target} reached the upstream as {fake.paths}"


def test_ordinary_relayed_paths_still_work_and_stay_literal(fake, start_proxy):
    proxy = start_proxy({"policies": policies_off()})
    assert [m.id for m in openai_client(proxy).models.list()] == ["gpt-4o", "gpt-4o-mini"]
    conn = RawConnection(proxy.url)
    try:
        assert conn.request("GET", "/v1/models/meta-llama/Llama-3.1-8B").status == 404  # the fake has no such route
        conn.request("GET", "/v1/models%3Fafter=x")  # an encoded "?" stays part of the path
        conn.request("GET", "/v1/models?limit=2")
    finally:
        conn.close()
    assert fake.paths == ["/v1/models", "/v1/models/meta-llama/Llama-3.1-8B", "/v1/models%3Fafter=x",
                          "/v1/models?limit=2"]


# ---------------------------------------------------------------------- 14. client credentials

CLIENT_CREDENTIALS = {
    "authorization": "Bearer sk-client", "api-key": "client-azure-key", "x-api-key": "client-anthropic-key",
    "cookie": "session=abc", "proxy-authorization": "Basic Zm9vOmJhcg==", "anthropic-api-key": "sk-ant-client",
    "x-goog-api-key": "client-goog", "x-amz-security-token": "tok", "ocp-apim-subscription-key": "sub",
    "x-auth-token": "t",
}
KEPT = {"openai-organization": "org-1", "x-request-id": "r-1", "openai-beta": "assistants=v2"}


def _sent_headers(fake) -> list[dict[str, str]]:
    return [r.headers for r in fake.received]


def _exercise(proxy) -> None:
    """A plain answer, a stream and a relayed endpoint, each with every kind of client credential."""
    headers = {**CLIENT_CREDENTIALS, **KEPT}
    body = {"model": "gpt-4o", "messages": HI}
    assert httpx.post(f"{proxy.url}/v1/chat/completions", json=body, headers=headers).status_code == 200
    assert httpx.post(f"{proxy.url}/v1/chat/completions", json={**body, "stream": True}, headers=headers).status_code == 200
    assert httpx.get(f"{proxy.url}/v1/models", headers=headers).status_code == 200


def test_client_credentials_never_reach_the_upstream_when_the_proxy_has_its_key(fake, start_proxy, monkeypatch):
    monkeypatch.setenv("CTXW_TEST_UPSTREAM_KEY", "sk-upstream")
    proxy = start_proxy({"policies": policies_off(), "upstream": {"api_key_env": "CTXW_TEST_UPSTREAM_KEY"}})
    _exercise(proxy)
    sent = _sent_headers(fake)
    assert len(sent) == 3
    for headers in sent:
        assert headers["authorization"] == "Bearer sk-upstream"
        leaked = {k: v for k, v in headers.items() if v in CLIENT_CREDENTIALS.values()}
        assert leaked == {}
        assert all(headers.get(k) == v for k, v in KEPT.items())


def test_without_its_own_key_the_proxy_passes_authorization_but_never_cookies(fake, start_proxy):
    proxy = start_proxy({"policies": policies_off()})
    _exercise(proxy)
    for headers in _sent_headers(fake):
        assert headers["authorization"] == "Bearer sk-client"
        assert "cookie" not in headers and "proxy-authorization" not in headers


def test_request_headers_unit(monkeypatch):
    from ctxwarden.proxy.config import UpstreamConfig

    up = Upstream(UpstreamConfig(base_url="http://u.test/v1", http_client="httpx", api_key_env="CTXW_UNIT_KEY"))
    monkeypatch.setenv("CTXW_UNIT_KEY", "sk-own")
    out = up.request_headers({**CLIENT_CREDENTIALS, **KEPT, "x-ctxwarden-session": "s", "content-type": "application/json"})
    assert out == {**KEPT, "content-type": "application/json", "authorization": "Bearer sk-own"}
    monkeypatch.delenv("CTXW_UNIT_KEY")
    out = up.request_headers({**CLIENT_CREDENTIALS, **KEPT})
    assert out["authorization"] == "Bearer sk-client" and out["api-key"] == "client-azure-key"
    assert "cookie" not in out and "proxy-authorization" not in out


@pytest.mark.parametrize("tenant, accepted", [
    ("acme", True), ("Team Blue/eu", True), ("", True),  # empty: the shared namespace
    ("a" * 129, False), ("ac\tme", False),
])
def test_the_tenant_header_is_checked_before_any_state_is_touched(fake, start_proxy, tenant, accepted):
    proxy = start_proxy({"policies": policies_off()})
    r = httpx.post(f"{proxy.url}/v1/chat/completions", headers={"x-ctxwarden-tenant": tenant},
                   json={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]})
    if accepted:
        assert r.status_code == 200, r.text
        return
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["code"] == "invalid_tenant" and error["param"] == "x-ctxwarden-tenant"
    assert not fake.received  # refused before anything reached the upstream


@pytest.mark.parametrize("http_client", ["aiohttp", "httpx"])
def test_a_cookie_the_upstream_sets_is_never_sent_back_for_anyone(fake, start_proxy, http_client):
    """The upstream client is shared by every tenant: a Set-Cookie from one answer must not ride
    along on the next request (another tenant's, another user's)."""
    proxy = start_proxy({"policies": policies_off(), "upstream": {"http_client": http_client}})
    answer = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o",
              "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]}
    fake.reply(raw=json.dumps(answer), content_type="application/json",
               headers={"set-cookie": "session=tenant-a-secret; Path=/"})
    first = httpx.post(f"{proxy.url}/v1/chat/completions", json={"model": "gpt-4o", "messages": HI},
                       headers={"x-ctxwarden-tenant": "tenant-a"})
    assert first.status_code == 200 and first.json()["choices"][0]["message"]["content"] == "hi"
    second = httpx.post(f"{proxy.url}/v1/chat/completions", json={"model": "gpt-4o", "messages": HI},
                        headers={"x-ctxwarden-tenant": "tenant-b"})
    assert second.status_code == 200
    sent = _sent_headers(fake)
    assert len(sent) == 2 and "cookie" not in sent[1], sent[1]
