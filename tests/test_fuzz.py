"""Property: whatever body a client sends, the real server answers below 500 (issue 13).

Generated requests (bench/fuzz_bodies.py; bench/fuzz.py runs 10,000 of them) go to the proxy
with its default policies on, in front of the fake upstream: every answer is a 4xx with an
OpenAI-shaped error, or a proper 2xx (a completion, or a stream ending in [DONE]); no policy
raises on a body validation let through; and the server still answers a valid request afterwards.
"""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
from hypothesis import HealthCheck, given, settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import fuzz_bodies  # noqa: E402

EXAMPLES = 200


def test_generated_requests_never_get_a_5xx(start_proxy):
    proxy = start_proxy(fuzz_bodies.CONFIG)
    failures = proxy.app.state.telemetry

    with httpx.Client(base_url=proxy.url, timeout=30) as client:

        @settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
        @given(fuzz_bodies.requests())
        def answers_properly(request: tuple[bytes, dict[bytes, bytes]]) -> None:
            raw, headers = request
            before = failures.value("ctxwarden.policy.failures")
            r = client.post("/v1/chat/completions", content=raw, headers={b"content-type": b"application/json", **headers})
            problem = fuzz_bodies.problem(r.status_code, r.headers.get("content-type", ""), r.content)
            assert problem is None, f"{problem}\nbody: {raw[:500]!r}"
            assert failures.value("ctxwarden.policy.failures") == before, f"a policy raised on: {raw[:500]!r}"

        answers_properly()
        after = client.post("/v1/chat/completions", json=fuzz_bodies.VALID)
    assert after.status_code == 200, after.text


def test_the_fuzz_bodies_cover_what_they_claim():
    """The generator does produce the cases issue 13 lists (so a green fuzz run means something)."""
    seen: set[str] = set()

    @settings(max_examples=400, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(fuzz_bodies.bodies())
    def collect(raw: bytes) -> None:
        for name, needle in (("surrogate", b"\\ud8"), ("huge int", b"9" * 4301), ("deep", b"[" * 100), ("nan", b"NaN"),
                             ("stream", b'"stream":true'), ("response_format", b"response_format"),
                             ("stream_options", b"stream_options"), ("function null", b'"function":null'),
                             ("empty tool_calls", b'"tool_calls":[]'), ("small model", fuzz_bodies.SMALL_MODEL.encode())):
            if needle in raw:
                seen.add(name)

    collect()
    assert seen == {"surrogate", "huge int", "deep", "nan", "stream", "response_format", "stream_options", "function null",
                    "empty tool_calls", "small model"}
