"""Bad input gets a 4xx naming the problem, never a 500 (issue 13), against the real server.

Body: deep nesting, integers past Python's conversion limit, NaN, lone surrogates, odd roles,
tool calls where they do not belong, malformed stream_options and response_format. Connection:
oversized headers (431) and slow clients (408), over raw sockets.
"""

from __future__ import annotations

import json
import select
import socket
import time

import httpx
import pytest

from ctxwarden.policies.poisoning.scores import completeness
from ctxwarden.proxy.chat import session_of
from ctxwarden.proxy.errors import ProxyError
from ctxwarden.proxy.telemetry import Telemetry
from ctxwarden.proxy.validation import MAX_DEPTH, parse_json_body

HI = [{"role": "user", "content": "hi"}]
ERROR_KEYS = {"message", "type", "code", "param"}


def post(proxy, body, headers=None) -> httpx.Response:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(f"{proxy.url}/v1/chat/completions", content=raw, timeout=30,
                      headers={"content-type": "application/json", **(headers or {})})


def refused(r: httpx.Response, status: int = 400) -> dict:
    """The OpenAI-shaped error of a refused request."""
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert set(error) == ERROR_KEYS and isinstance(error["message"], str)
    return error


def policy_failures(proxy) -> float:
    return proxy.app.state.telemetry.value("ctxwarden.policy.failures")


def looping(rounds: int = 4) -> list[dict]:
    """The same call with the same result, `rounds` times: the loops policy stops it."""
    msgs = [{"role": "user", "content": "find it"}]
    for i in range(rounds):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "search", "arguments": '{"q": "x"}'}}
        msgs += [{"role": "assistant", "content": None, "tool_calls": [call]},
                 {"role": "tool", "tool_call_id": f"c{i}", "content": "no results"}]
    return msgs


# ---------------------------------------------------------------------------- JSON itself


def test_json_nested_100k_levels_is_400_and_fast(start_proxy):
    proxy = start_proxy()
    started = time.perf_counter()
    r = post(proxy, b'{"model": "gpt-4o", "messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    error = refused(r)
    assert f"more than {MAX_DEPTH} levels deep" in error["message"]
    deep_metadata = {"model": "gpt-4o", "messages": HI, "metadata": json.loads("[" * 200 + "]" * 200)}
    assert "levels deep" in refused(post(proxy, deep_metadata))["message"]
    assert time.perf_counter() - started < 5
    assert post(proxy, {"model": "gpt-4o", "messages": HI}).status_code == 200


def test_depth_limit_is_exact_and_a_big_legit_body_stays_fast():
    assert parse_json_body(("[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1)).join(['{"a": ', "}"]).encode())
    with pytest.raises(ProxyError, match="levels deep"):
        parse_json_body(("[" * MAX_DEPTH + "]" * MAX_DEPTH).join(['{"a": ', "}"]).encode())
    schema = json.loads('{"type": "object", "properties": {"a": ' * 40 + "{}" + "}}" * 40)
    body = {"model": "gpt-4o", "tools": [{"type": "function", "function": {"name": f"t{i}", "parameters": schema}} for i in range(50)],
            "messages": [{"role": "user", "content": "word " * 200} for _ in range(2000)]}
    raw = json.dumps(body).encode()
    assert len(raw) > 2_000_000
    parse_ms, loads_ms = best_ms(lambda: parse_json_body(raw)), best_ms(lambda: json.loads(raw))
    assert parse_ms < 2 * loads_ms + 5, (parse_ms, loads_ms)  # the checks cost a fraction of the parse itself


def best_ms(call, runs: int = 7) -> float:
    """The fastest of `runs` calls (the least disturbed by other work on the machine)."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return min(times)


def test_integer_longer_than_4300_digits_is_400(start_proxy):
    proxy = start_proxy()
    raw = b'{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "max_tokens": ' + b"9" * 5000 + b"}"
    assert "4300 digits" in refused(post(proxy, raw))["message"]
    nested = b'{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi", "x": [' + b"1" * 4301 + b"]}]}"
    refused(post(proxy, nested))


def test_nan_and_infinity_are_not_json(start_proxy):
    proxy = start_proxy()
    for constant in (b"NaN", b"Infinity", b"-Infinity"):
        raw = b'{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "temperature": ' + constant + b"}"
        assert constant.decode() in refused(post(proxy, raw))["message"]


# ---------------------------------------------------------------------------- lone surrogates

SURROGATES = [
    (b'{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi \\ud800"}]}', "messages[0].content"),
    (b'{"model": "gpt\\uDFFF", "messages": [{"role": "user", "content": "hi"}]}', "model"),
    (b'{"model": "gpt-4o", "user": "\\udc00", "messages": [{"role": "user", "content": "hi"}]}', "user"),
    (b'{"model": "gpt-4o", "messages": [{"role": "user", "content": [{"type": "text", "text": "\\ud83d"}]}]}',
     "messages[0].content[0].text"),
    (b'{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "metadata": {"\\ud800k": 1}}', "metadata.\\ud800k"),
    (b'{"model": "gpt-4o", "messages": [{"role": "user", "content": "go"}, {"role": "assistant", "content": null, '
     b'"tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\\"q\\": \\"\\udfff\\ud800\\"}"}}]}]}',
     "messages[1].tool_calls[0].function.arguments"),
]


@pytest.mark.parametrize("raw, path", SURROGATES, ids=[p for _, p in SURROGATES])
def test_lone_surrogate_is_400_naming_the_json_path(start_proxy, fake, raw, path):
    proxy = start_proxy()
    error = refused(post(proxy, raw))
    assert error["param"] == path and "surrogate" in error["message"]
    assert fake.chat_requests == []
    assert httpx.get(f"{proxy.url}/metrics").status_code == 200  # a surrogate model name used to break it for good
    assert policy_failures(proxy) == 0


def test_surrogate_pairs_and_escaped_backslashes_pass(start_proxy, fake):
    proxy = start_proxy()
    raw = b'{"model": "gpt-4o", "messages": [{"role": "user", "content": "smile \\ud83d\\ude00 and \\\\ud800"}]}'
    r = post(proxy, raw)
    assert r.status_code == 200, r.text
    assert fake.chat_requests[0]["messages"][0]["content"] == "smile \U0001f600 and \\ud800"


def test_metrics_and_session_survive_a_surrogate_that_gets_past_validation():
    telemetry = Telemetry()
    telemetry.metrics.add("ctxwarden.requests", 1, model="gpt\ud800")
    assert "gpt\\\\ud800" in telemetry.prometheus_text().encode("utf-8").decode()
    body = {"messages": [{"role": "user", "content": "hi \ud800"}]}
    assert session_of(body, {}).startswith("conv:")


def test_header_values_that_are_not_utf8_do_not_crash(start_proxy, fake):
    proxy = start_proxy()
    headers = {b"x-ctxwarden-session": b"\xff\xfe\x80", b"x-ctxwarden-tenant": b"\xc3\x28", b"x-ctxwarden-timestamps": b"\xed\xa0\x80"}
    r = httpx.post(f"{proxy.url}/v1/chat/completions", json={"model": "gpt-4o", "messages": HI}, headers=headers, timeout=30)
    assert r.status_code == 200, r.text
    assert httpx.get(f"{proxy.url}/metrics").status_code == 200


# ---------------------------------------------------------------------------- the chat shape


def test_unhashable_role_is_400(start_proxy):
    proxy = start_proxy()
    for role in ([], {}, ["user"]):
        error = refused(post(proxy, {"model": "gpt-4o", "messages": [{"role": role, "content": "hi"}]}))
        assert error["param"] == "messages[0].role"


def test_tool_calls_only_on_assistant_messages(start_proxy, fake):
    proxy = start_proxy()
    for role, calls in (("user", [{"id": "z", "function": None}]), ("user", "abc"), ("system", [])):
        body = {"model": "gpt-4o", "messages": [{"role": role, "content": "x", "tool_calls": calls}, *HI]}
        assert refused(post(proxy, body))["param"] == "messages[0].tool_calls"
    body = {"model": "gpt-4o", "messages": [*looping(1), {"role": "tool", "tool_call_id": "c0", "content": "r", "tool_calls": [{}]}]}
    refused(post(proxy, body))
    assert fake.chat_requests == [] and policy_failures(proxy) == 0


def test_non_function_tool_with_a_bad_function_is_400(start_proxy):
    proxy = start_proxy()
    for tool in ({"type": "custom", "function": None}, {"type": "custom", "function": {"name": []}},
                 {"type": ["function"]}, {"type": "function", "function": {"name": "f", "parameters": "x"}}):
        error = refused(post(proxy, {"model": "gpt-4o", "messages": HI, "tools": [tool]}))
        assert error["param"].startswith("tools[0]")
    ok = post(proxy, {"model": "gpt-4o", "messages": HI, "tools": [{"type": "custom", "custom": {"name": "g"}}]})
    assert ok.status_code == 200, ok.text


def test_odd_but_valid_history_survives_a_rewrite(start_proxy, fake):
    """`tool_calls: []`, a legacy function call and list content while history compacts: 200, no policy fails."""
    proxy = start_proxy({"models": {"small": {"context_window": 1200}}})
    long = " ".join(f"Step {i}: the service returned status {200 + i % 3} after {i * 7} ms." for i in range(60))
    msgs = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": long},
            {"role": "assistant", "content": "ok", "tool_calls": []},
            {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{}"}},
            {"role": "function", "name": "f", "content": [{"type": "text", "text": long}]}]
    for i in range(4):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "s", "arguments": f'{{"q": {i}}}'}}
        msgs += [{"role": "assistant", "content": None, "tool_calls": [call]},
                 {"role": "tool", "tool_call_id": f"c{i}", "content": long[: 200 * (i + 1)]}]
    msgs.append({"role": "user", "content": "and now?"})
    for stream in (False, True):
        r = post(proxy, {"model": "small", "messages": msgs, "stream": stream})
        assert r.status_code == 200, r.text
        assert "history.compaction" in r.headers["x-ctxwarden-actions"]
    assert policy_failures(proxy) == 0
    bad = [dict(m) for m in msgs]
    bad[5] = {**bad[5], "tool_calls": [{"id": "c0", "type": "function", "function": None}]}
    assert refused(post(proxy, {"model": "small", "messages": bad}))["param"] == "messages[5].tool_calls[0].function"
    part = [*msgs[:1], {"role": "user", "content": [{"type": "text", "text": ["x"]}]}]
    assert refused(post(proxy, {"model": "small", "messages": part}))["param"] == "messages[1].content[0].text"


def test_name_must_be_a_string(start_proxy):
    proxy = start_proxy()
    error = refused(post(proxy, {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi", "name": ["a"]}]}))
    assert error["param"] == "messages[0].name"
    assert policy_failures(proxy) == 0


# ---------------------------------------------------------------------------- options the proxy reads


@pytest.mark.parametrize("options, param", [("x", "stream_options"), ([], "stream_options"),
                                            ({"include_usage": "yes"}, "stream_options.include_usage")])
def test_stream_options_must_be_an_object(start_proxy, fake, options, param):
    proxy = start_proxy()
    r = post(proxy, {"model": "gpt-4o", "messages": looping(), "stream": True, "stream_options": options})
    assert refused(r)["param"] == param


def test_loop_stop_stream_with_usage(start_proxy, fake):
    proxy = start_proxy({"policies": {"loops": {"action": "stop"}}})
    r = post(proxy, {"model": "gpt-4o", "messages": looping(), "stream": True, "stream_options": {"include_usage": True}})
    assert r.status_code == 200 and r.headers["x-ctxwarden-actions"] == "loops.stop"
    chunks = [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: {")]
    assert chunks[-1]["usage"] == {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    assert r.text.rstrip().endswith("data: [DONE]") and fake.chat_requests == []


BAD_FORMATS = [
    ("x", "response_format"),
    ({}, "response_format.type"),
    ({"type": "yaml"}, "response_format.type"),
    ({"type": ["json_object"]}, "response_format.type"),
    ({"type": "json_schema"}, "response_format.json_schema"),
    ({"type": "json_schema", "json_schema": "x"}, "response_format.json_schema"),
    ({"type": "json_schema", "json_schema": {"schema": {}}}, "response_format.json_schema.name"),
    ({"type": "json_schema", "json_schema": {"name": "a", "schema": "x"}}, "response_format.json_schema.schema"),
    ({"type": "json_schema", "json_schema": {"name": "a", "strict": "yes"}}, "response_format.json_schema.strict"),
]


@pytest.mark.parametrize("fmt, param", BAD_FORMATS, ids=[p + str(i) for i, (_, p) in enumerate(BAD_FORMATS)])
def test_malformed_response_format_is_400(start_proxy, fake, fmt, param):
    """It used to go upstream and make the poisoning policy fail on the answer: checks silently skipped."""
    proxy = start_proxy()
    assert refused(post(proxy, {"model": "gpt-4o", "messages": HI, "response_format": fmt}))["param"] == param
    assert fake.chat_requests == [] and policy_failures(proxy) == 0


def test_a_json_schema_answer_is_checked_like_any_other(start_proxy, fake):
    proxy = start_proxy()
    fmt = {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "object", "required": ["status", ["x"]]}}}
    fake.reply(content='{"status": "ok"}')
    r = post(proxy, {"model": "gpt-4o", "messages": HI, "response_format": fmt})
    assert r.status_code == 200, r.text
    assert "completeness=1.00" in r.headers["x-ctxwarden-validation"]
    assert policy_failures(proxy) == 0


def test_completeness_never_raises_on_odd_shapes():
    for fmt in ("x", [], {"type": "json_schema", "json_schema": "x"}, {"type": "json_schema", "json_schema": {"schema": []}},
                {"type": "json_schema", "json_schema": {"schema": {"required": "status"}}},
                {"type": "json_schema", "json_schema": {"schema": {"required": [["x"], {"a": 1}, "status"]}}}):
        assert 0.0 <= completeness('{"status": 1}', {"response_format": fmt}, "stop") <= 1.0


# ---------------------------------------------------------------------------- the connection: raw sockets


def exchange(proxy, chunks: list[bytes], pause_s: float = 0.0, wait_s: float = 5.0) -> tuple[bytes, float]:
    """Send `chunks` (pausing between them), then read until the server closes; (answer, seconds to close)."""
    host, port = proxy.url.removeprefix("http://").split(":")
    started = time.monotonic()
    with socket.create_connection((host, int(port)), timeout=wait_s) as sock:
        try:
            for chunk in chunks:
                if select.select([sock], [], [], 0)[0]:
                    break  # the server answered (or closed): stop sending
                sock.sendall(chunk)
                time.sleep(pause_s)
        except OSError:  # the server answered and closed while we were still sending
            pass
        answer = b""
        try:
            while data := sock.recv(65536):
                answer += data
        except (ConnectionResetError, socket.timeout):
            pass
    return answer, time.monotonic() - started


def parse_answer(answer: bytes) -> tuple[int, dict]:
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def test_oversized_headers_get_431_before_the_rest_is_read(start_proxy):
    proxy = start_proxy()
    start = b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nx-big: "
    answer, _ = exchange(proxy, [start + b"a" * 128 * 1024])  # no end of headers: the server must not wait for it
    status, body = parse_answer(answer)
    assert status == 431 and body["error"]["code"] == "request_header_fields_too_large"
    assert set(body["error"]) == ERROR_KEYS
    many = b"".join(b"x-h%d: %s\r\n" % (i, b"v" * 1000) for i in range(100))  # 100 KB of small headers, complete
    answer, _ = exchange(proxy, [b"GET /healthz HTTP/1.1\r\nhost: x\r\n" + many + b"\r\n"])
    assert parse_answer(answer)[0] == 431
    fits = {f"x-h{i}": "v" * 1000 for i in range(30)}
    assert httpx.get(f"{proxy.url}/healthz", headers=fits).status_code == 200


def test_header_size_limit_follows_config(start_proxy):
    proxy = start_proxy({"server": {"max_header_kb": 4}})
    assert httpx.get(f"{proxy.url}/healthz", headers={"x-a": "v" * 5000}).status_code == 431
    assert httpx.get(f"{proxy.url}/healthz", headers={"x-a": "v" * 3000}).status_code == 200


def test_slow_headers_get_408_and_an_idle_connection_is_closed(start_proxy):
    proxy = start_proxy({"server": {"header_timeout_s": 0.5}})
    trickle = [b"POST /v1/chat/completions HTTP/1.1\r\n"] + [b"x-slow: 1\r\n"] * 30
    answer, took = exchange(proxy, trickle, pause_s=0.1)
    status, body = parse_answer(answer)
    assert status == 408 and body["error"]["code"] == "request_timeout" and "server.header_timeout_s" in body["error"]["message"]
    assert took < 4
    answer, took = exchange(proxy, [])  # connects, sends nothing
    assert answer == b"" and took < 3
    quick = [b"GET /healthz HTTP/1.1\r\n", b"host: x\r\n", b"connection: close\r\n\r\n"]
    answer, _ = exchange(proxy, quick, pause_s=0.1)  # slow, but within the limit
    assert answer.startswith(b"HTTP/1.1 200")


def test_slow_body_gets_408(start_proxy, fake):
    proxy = start_proxy({"server": {"body_timeout_s": 0.5}})
    head = b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 200\r\n\r\n"
    answer, took = exchange(proxy, [head, b'{"model": "gpt-4o", '] + [b" "] * 20, pause_s=0.1)
    status, body = parse_answer(answer)
    assert status == 408 and body["error"]["code"] == "request_timeout" and "server.body_timeout_s" in body["error"]["message"]
    assert took < 4 and fake.chat_requests == []
    assert post(proxy, {"model": "gpt-4o", "messages": HI}).status_code == 200


def test_both_entry_points_build_the_server_with_the_limits(monkeypatch):
    import uvicorn

    from ctxwarden.proxy import cli
    from ctxwarden.proxy.local_server import LocalServer
    from ctxwarden.proxy.server import LimitedHttpToolsProtocol

    seen = []
    monkeypatch.setattr("ctxwarden.proxy.app.create_app", lambda settings: object())
    monkeypatch.setattr(uvicorn.Server, "run", lambda self: (seen.append(self.config), setattr(self, "started", True)))
    assert cli.main(["serve", "--port", "9"]) == 0
    server = LocalServer(object())
    for config in (seen[0], server.server.config):
        assert issubclass(config.http, LimitedHttpToolsProtocol)
        assert config.http.limits.max_header_bytes == 64 * 1024 and config.http.limits.body_timeout_s == 30


def test_a_megabyte_session_name_becomes_a_short_stable_id():
    from ctxwarden.proxy.session_ids import MAX_SESSION_ID

    huge = {"user": "u" * 1_500_000, "messages": [{"role": "user", "content": "hi"}]}
    other = {"user": "u" * 1_499_999 + "v", "messages": [{"role": "user", "content": "hi"}]}
    session = session_of(huge, {})
    assert len(session) <= MAX_SESSION_ID and session == session_of(dict(huge), {})
    assert session != session_of(other, {})
    assert len(session_of({"messages": []}, {"x-ctxwarden-session": "s" * 60_000})) <= MAX_SESSION_ID
    assert session_of({"user": "alice", "messages": []}, {}) == "user:alice"  # short ids as sent
