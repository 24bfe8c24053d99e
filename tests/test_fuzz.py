"""Property: whatever body a client sends, the real server answers below 500 (issues 13, 43).

Generated requests (bench/fuzz_bodies.py; bench/fuzz.py runs 10,000 of them) go to the proxy's
three APIs with its default policies on, in front of the fake upstream (which speaks all three):
every answer is a 4xx with an error in the API's shape, or a proper 2xx (the API's answer, or a
stream its closing event ends); no policy raises on a body validation let through; and the server
still answers a valid request afterwards. A few bodies carry a string of 20 KB-1.5 MB somewhere.
"""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
from hypothesis import HealthCheck, given, settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import fuzz_bodies  # noqa: E402

EXAMPLES = 200


def test_generated_requests_never_get_a_5xx(fake, start_proxy):
    proxy = start_proxy({**fuzz_bodies.CONFIG, "upstream": {"anthropic": {"base_url": f"{fake.url}/v1", "api_key_env": None}}})
    failures = proxy.app.state.telemetry

    with httpx.Client(base_url=proxy.url, timeout=30) as client:

        @settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
        @given(fuzz_bodies.api_requests(big_share=0.02))
        def answers_properly(request: tuple[str, bytes, dict[bytes, bytes], str]) -> None:
            api, raw, headers, _ = request
            before = failures.value("ctxwarden.policy.failures")
            r = client.post(fuzz_bodies.PATHS[api], content=raw, headers={b"content-type": b"application/json", **headers})
            problem = fuzz_bodies.problem(r.status_code, r.headers.get("content-type", ""), r.content, api)
            assert problem is None, f"{problem}\nbody ({api}): {raw[:500]!r}"
            assert failures.value("ctxwarden.policy.failures") == before, f"a policy raised on ({api}): {raw[:500]!r}"

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


def test_the_three_api_bodies_cover_what_they_claim():
    """Issue 43's generator: every API, every big-field site, and valid hints in many keys."""
    apis: set[str] = set()
    sites: set[str] = set()
    sessions: set[bytes] = set()

    @settings(max_examples=600, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(fuzz_bodies.api_requests(big_share=0.5))
    def collect(request: tuple[str, bytes, dict[bytes, bytes], str]) -> None:
        api, raw, headers, site = request
        apis.add(api)
        sites.add(site)
        sessions.add(headers.get(b"x-ctxwarden-session", b""))
        big.append(len(raw) >= fuzz_bodies.BIG_MIN)

    big: list[bool] = []
    collect()
    assert apis == set(fuzz_bodies.APIS) and sites >= set(fuzz_bodies.BIG_SITES) and len(sessions) > 100
    assert 0.2 < sum(big) / len(big) <= 0.5  # about the share asked for (a mutation may drop the field)
