"""The `llm` and `hybrid` poisoning checkers, unit by unit: a fake `complete_raw` (or respx for a
judge endpoint of its own) plays the judge model, a stub plays the local checker."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import httpx
import pytest
import respx

from ctxwarden.policies.base import Services
from ctxwarden.policies.poisoning.checkers.base import (
    CONTRADICTED,
    SUPPORTED,
    UNVERIFIABLE,
    CheckContext,
    ClaimToCheck,
    ClaimVerdict,
    Evidence,
)
from ctxwarden.policies.poisoning.checkers.hybrid import HybridChecker
from ctxwarden.policies.poisoning.checkers.llm import LLMChecker
from ctxwarden.policies.poisoning.config import JudgeConfig

QUESTION = "Where is the Eiffel Tower, and when did it open?"
PARIS = Evidence("eiffel#0", "eiffel", "The Eiffel Tower is located in Paris.",
                 "The Eiffel Tower is located in Paris. It opened in 1889.", 0.03, similarity=0.9)
OPENED = Evidence("eiffel#1", "eiffel", "It opened in 1889.",
                  "The Eiffel Tower is located in Paris. It opened in 1889.", 0.02, similarity=0.7)
HEIGHT = Evidence("eiffel#2", "eiffel", "The tower is 330 metres tall.", "It opened in 1889. The tower is 330 metres tall.",
                  0.01, similarity=0.6)


def claim(text: str, *evidence: Evidence, question: str = QUESTION, context: str = "") -> ClaimToCheck:
    return ClaimToCheck(text, question, tuple(evidence), context)


LONDON = claim("The Eiffel Tower is located in London.", PARIS, OPENED)
OPENED_1889 = claim("It opened in 1889.", OPENED, HEIGHT, context="The Eiffel Tower is located in London.")
TALL = claim("It is 500 metres tall.", HEIGHT, context="It opened in 1889.")


def reply(*verdicts: dict, total_tokens: int = 90, content: str | None = None) -> dict:
    body = content if content is not None else json.dumps({"verdicts": list(verdicts)})
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": body}}],
            "usage": {"prompt_tokens": total_tokens - 10, "completion_tokens": 10, "total_tokens": total_tokens}}


def v(index: int, verdict: str, confidence: float = 0.9, evidence: int | None = 1, kind: str = "none") -> dict:
    return {"index": index, "verdict": verdict, "confidence": confidence, "evidence": evidence, "kind": kind}


class FakeJudge:
    """`Services.complete_raw` answering from a queue; each entry a response dict, an exception,
    or ("sleep", seconds)."""

    def __init__(self, *replies) -> None:
        self.replies = list(replies)
        self.calls: list[dict] = []

    async def __call__(self, model, messages, exchange=None, **kwargs):
        self.calls.append({"model": model, "messages": messages, "exchange": exchange, **kwargs})
        entry = self.replies.pop(0)
        if isinstance(entry, tuple):
            await asyncio.sleep(entry[1])
            entry = self.replies.pop(0) if self.replies else reply()
        if isinstance(entry, BaseException):
            raise entry
        return entry

    def prompt(self, n: int = -1) -> str:
        return self.calls[n]["messages"][-1]["content"]


class StubLocal:
    """A local checker with fixed verdicts by claim text; records what it was asked."""

    name = "local"

    def __init__(self, verdicts: dict[str, tuple[str, float]] | None = None) -> None:
        self.verdicts = verdicts or {}
        self.asked: list[list[str]] = []

    async def check(self, claims, ctx):
        self.asked.append([c.text for c in claims])
        return [ClaimVerdict(c.text, *self.verdicts.get(c.text, (UNVERIFIABLE, 0.0)), checker="local") for c in claims]


def judge(fake=None, fallback=None, services=None, **config) -> LLMChecker:
    services = services or Services(tokens=None, metrics=None, complete_raw=fake)  # type: ignore[arg-type]
    return LLMChecker(JudgeConfig(model="judge-model", **{"timeout_s": 2.0, **config}), services,
                      fallback=fallback or StubLocal())


# ----------------------------------------------------------------------------- the llm checker


async def test_one_call_judges_every_claim_and_its_verdicts_are_honoured():
    fake = FakeJudge(reply(v(1, "contradicted", 0.95, 1, "wrong_entity"), v(2, "supported", 0.8, 1),
                           v(3, "unverifiable", 0.6, None), total_tokens=100))
    checker = judge(fake)
    ctx = CheckContext(exchange="the-exchange")
    out = await checker.check([LONDON, OPENED_1889, TALL], ctx)

    assert len(fake.calls) == 1 and checker.calls == 1
    assert [o.label for o in out] == [CONTRADICTED, SUPPORTED, UNVERIFIABLE]
    assert out[0].confidence == 0.95 and out[0].kind == "wrong_entity" and out[1].kind == ""
    assert out[0].evidence == PARIS.window and out[0].evidence_id == "eiffel#0"  # window [1], the claim's own passage
    assert out[1].evidence_id == "eiffel#1"  # the same window [1], as OPENED_1889 retrieved it
    assert out[2].evidence == "" and out[2].evidence_id == ""
    assert {o.checker for o in out} == {"llm"} and ctx.events == []
    call = fake.calls[0]
    assert call["model"] == "judge-model" and call["exchange"] == "the-exchange" and call["temperature"] == 0
    fmt = call["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["schema"]["properties"]["verdicts"]["items"]["additionalProperties"] is False


async def test_prompt_has_the_question_once_and_each_evidence_window_once_numbered():
    fake = FakeJudge(reply(v(1, "supported"), v(2, "supported"), v(3, "supported")))
    await judge(fake).check([LONDON, OPENED_1889, TALL], CheckContext())
    prompt = fake.prompt()
    assert prompt.count(f"Question: {QUESTION}") == 1
    assert prompt.count(PARIS.window) == 1  # PARIS and OPENED share a window: sent once
    assert f"[1] {PARIS.window}" in prompt and f"[2] {HEIGHT.window}" in prompt and "[3]" not in prompt
    assert "1. The Eiffel Tower is located in London." in prompt
    assert '2. (after: "…The Eiffel Tower is located in London.") It opened in 1889.' in prompt
    assert "answer to the question" in fake.calls[0]["messages"][0]["content"]


async def test_short_answer_goes_with_its_own_question():
    city = Evidence("hq#0", "hq", "Acme's head office is in Mumbai.", "Acme's head office is in Mumbai.", 0.03, 0.8)
    short = claim("Delhi", city, question="In what city is Acme's head office?")
    other = claim("It was founded in 1990.", city, question="When was Acme founded?")
    fake = FakeJudge(reply(v(1, "contradicted", 0.9, 1, "wrong_entity"), v(2, "unverifiable", 0.7, None)))
    out = await judge(fake).check([short, other], CheckContext())
    prompt = fake.prompt()
    assert "1. (question: In what city is Acme's head office?)\n1. Delhi" in prompt
    assert "2. (question: When was Acme founded?)" in prompt
    assert out[0].label == CONTRADICTED and out[0].evidence_id == "hq#0"


async def test_tokens_are_shared_and_latency_recorded():
    fake = FakeJudge(("sleep", 0.05), reply(v(1, "supported"), v(2, "supported"), v(3, "supported"), total_tokens=101))
    out = await judge(fake).check([LONDON, OPENED_1889, TALL], CheckContext())
    assert [o.tokens for o in out] == [34, 34, 33] and sum(o.tokens for o in out) == 101
    assert all(o.latency_ms >= 50 for o in out)
    assert out[0].as_dict()["tokens"] == 34 and out[0].as_dict()["checker"] == "llm"


async def test_repeat_answer_is_served_from_the_cache_without_a_call():
    fake = FakeJudge(reply(v(1, "contradicted", 0.95, 1, "wrong_entity"), v(2, "supported", 0.8, 2)),
                     reply(v(1, "supported", 0.9, 1)))
    checker = judge(fake)
    first = await checker.check([LONDON, TALL], CheckContext())
    again = await checker.check([LONDON, TALL], CheckContext())
    assert len(fake.calls) == 1
    assert [(o.label, o.confidence, o.evidence_id, o.kind) for o in again] == \
        [(o.label, o.confidence, o.evidence_id, o.kind) for o in first]
    assert all(o.note == "cached" and o.tokens == 0 for o in again)

    # the same claim with other evidence (the KB changed) is judged afresh, and alone
    moved = claim(LONDON.text, HEIGHT)
    out = await checker.check([moved, TALL], CheckContext())
    assert len(fake.calls) == 2 and "2." not in fake.prompt().split("Claims:")[1]
    assert out[0].label == SUPPORTED and out[1].note == "cached"


async def test_cache_size_zero_always_calls():
    fake = FakeJudge(reply(v(1, "supported")), reply(v(1, "supported")))
    checker = judge(fake, cache_size=0)
    await checker.check([LONDON], CheckContext())
    await checker.check([LONDON], CheckContext())
    assert len(fake.calls) == 2


async def test_claims_without_evidence_make_no_call():
    fake = FakeJudge()
    out = await judge(fake).check([claim("Bananas are berries.")], CheckContext())
    assert fake.calls == [] and out[0].label == UNVERIFIABLE and out[0].checker == "llm"


# ----------------------------------------------------------------------------- fallbacks

LOCAL = {LONDON.text: (CONTRADICTED, 0.9), TALL.text: (UNVERIFIABLE, 0.2)}


async def assert_fell_back(fake: FakeJudge, reason: str, **config) -> list[dict]:
    local = StubLocal(LOCAL)
    checker = judge(fake, fallback=local, **config)
    ctx = CheckContext()
    out = await checker.check([LONDON, TALL], ctx)
    assert local.asked == [[LONDON.text, TALL.text]]
    assert [(o.label, o.confidence, o.checker) for o in out] == [(CONTRADICTED, 0.9, "local"), (UNVERIFIABLE, 0.2, "local")]
    assert all(o.note.startswith("fallback: ") for o in out)
    assert [(e["event"], e["reason"], e["claims"]) for e in ctx.events] == [("judge_fallback", reason, 2)]
    # a fallback is not cached: the next answer asks the judge again
    fake.replies = [reply(v(1, "supported"), v(2, "supported"))]
    again = await checker.check([LONDON, TALL], CheckContext())
    assert [o.checker for o in again] == ["llm", "llm"]
    return ctx.events


async def test_timeout_falls_back_to_local():
    events = await assert_fell_back(FakeJudge(("sleep", 1.0)), "timeout", timeout_s=0.05)
    assert events[0]["latency_ms"] < 900


@pytest.mark.parametrize("content", [
    "The claims look fine to me.",  # not JSON
    json.dumps({"verdicts": [v(1, "supported")]}),  # one verdict for two claims
    json.dumps({"verdicts": [v(1, "supported"), v(1, "supported")]}),  # claim 2 missing
    json.dumps({"verdicts": [v(1, "true"), v(2, "false")]}),  # labels outside the schema
    json.dumps({"verdicts": [v(1, "supported", 1.7), v(2, "supported")]}),  # confidence out of 0..1
    json.dumps({"verdicts": [v(1, "supported", 0.9, 7), v(2, "supported")]}),  # cites evidence [7] of 2
])
async def test_bad_json_falls_back_to_local(content):
    await assert_fell_back(FakeJudge(reply(content=content)), "bad_json")


async def test_transport_error_and_refusal_fall_back():
    events = await assert_fell_back(FakeJudge(httpx.ConnectError("refused")), "error")
    assert "refused" in events[0]["detail"]
    refusal = {"choices": [{"message": {"content": None, "refusal": "I can't help with that."}}]}
    await assert_fell_back(FakeJudge(refusal), "bad_json")


async def test_fenced_json_is_accepted():
    fenced = "```json\n" + json.dumps({"verdicts": [v(1, "CONTRADICTED", 0.9, 1, "wrong_entity")]}) + "\n```"
    out = await judge(FakeJudge(reply(content=fenced))).check([LONDON], CheckContext())
    assert out[0].label == CONTRADICTED and out[0].checker == "llm"


async def test_older_services_with_only_complete_still_work():
    async def complete(model, messages, exchange=None, **kwargs):
        return json.dumps({"verdicts": [v(1, "contradicted", 0.9, 1, "wrong_entity")]})

    services = Services(tokens=None, metrics=None, complete=complete)  # type: ignore[arg-type]
    out = await judge(services=services).check([LONDON], CheckContext())
    assert out[0].label == CONTRADICTED and out[0].tokens == 0


def test_a_judge_needs_a_model():
    with pytest.raises(ValueError, match="judge.model"):
        LLMChecker(JudgeConfig(), Services(tokens=None, metrics=None), fallback=StubLocal())  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- a judge endpoint of its own

JUDGE_URL = "http://judge.test/v1"


@respx.mock
async def test_base_url_sends_the_env_key_never_the_clients(monkeypatch):
    monkeypatch.setenv("JUDGE_KEY", "sk-judge-env")
    route = respx.post(f"{JUDGE_URL}/chat/completions").mock(
        return_value=httpx.Response(200, json=reply(v(1, "contradicted", 0.9, 1, "wrong_entity"), total_tokens=40)))
    upstream = FakeJudge()
    exchange = SimpleNamespace(notes=SimpleNamespace(upstream_headers={"authorization": "Bearer sk-client"}))
    checker = judge(upstream, base_url=JUDGE_URL + "/", api_key_env="JUDGE_KEY")
    out = await checker.check([LONDON], CheckContext(exchange=exchange))
    await checker.aclose()

    assert upstream.calls == [] and route.call_count == 1
    request = route.calls[0].request
    assert request.headers["authorization"] == "Bearer sk-judge-env"
    assert "sk-client" not in str(request.headers)
    body = json.loads(request.content)
    assert body["model"] == "judge-model" and body["response_format"]["json_schema"]["strict"] is True
    assert out[0].label == CONTRADICTED and out[0].tokens == 40 and out[0].checker == "llm"


@respx.mock
async def test_base_url_error_status_falls_back_with_the_status():
    respx.post(f"{JUDGE_URL}/chat/completions").mock(return_value=httpx.Response(503, json={"error": {}}))
    ctx = CheckContext()
    checker = judge(base_url=JUDGE_URL, fallback=StubLocal(LOCAL))
    out = await checker.check([LONDON], ctx)
    await checker.aclose()
    assert out[0].checker == "local" and out[0].label == CONTRADICTED
    assert ctx.events[0]["reason"] == "error" and ctx.events[0]["status"] == 503


@respx.mock
async def test_base_url_timeout_falls_back():
    respx.post(f"{JUDGE_URL}/chat/completions").mock(side_effect=httpx.ReadTimeout("slow"))
    ctx = CheckContext()
    out = await judge(base_url=JUDGE_URL, fallback=StubLocal(LOCAL)).check([LONDON], ctx)
    assert out[0].checker == "local" and ctx.events[0]["reason"] == "timeout"


# ----------------------------------------------------------------------------- hybrid

SURE_FALSE = claim("The Eiffel Tower is located in Rome.", PARIS)
UNSURE = claim("It opened in 1899.", OPENED)
NEAR = claim("It is the tallest structure in Paris.", HEIGHT)  # unverifiable locally, close evidence (0.6)
FAR = claim("It is painted brown.", Evidence("x#0", "x", "Paint.", "Paint.", 0.01, similarity=0.2))
BARE = claim("Bananas are berries.")
HYBRID_LOCAL = {SURE_FALSE.text: (CONTRADICTED, 0.95), UNSURE.text: (CONTRADICTED, 0.55),
                NEAR.text: (UNVERIFIABLE, 0.1), FAR.text: (UNVERIFIABLE, 0.1), BARE.text: (UNVERIFIABLE, 0.0)}


async def test_hybrid_sends_only_the_unsure_claims_in_one_call():
    fake = FakeJudge(reply(v(1, "contradicted", 0.92, 1, "wrong_date"), v(2, "supported", 0.85, 1), total_tokens=60))
    local = StubLocal(HYBRID_LOCAL)
    claims = [SURE_FALSE, UNSURE, NEAR, FAR, BARE]
    out = await HybridChecker(local, judge(fake), (0.3, 0.8)).check(claims, CheckContext())

    assert local.asked == [[c.text for c in claims]] and len(fake.calls) == 1
    sent = fake.prompt().split("Claims:")[1]
    assert UNSURE.text in sent and NEAR.text in sent
    assert SURE_FALSE.text not in sent and FAR.text not in sent and BARE.text not in sent
    assert [(o.label, o.checker) for o in out] == [
        (CONTRADICTED, "local"), (CONTRADICTED, "llm"), (SUPPORTED, "llm"), (UNVERIFIABLE, "local"), (UNVERIFIABLE, "local")]
    assert out[1].confidence == 0.92 and out[1].kind == "wrong_date" and out[0].confidence == 0.95
    assert out[1].tokens + out[2].tokens == 60 and out[0].tokens == 0


async def test_hybrid_makes_no_call_when_local_is_sure():
    fake = FakeJudge()
    out = await HybridChecker(StubLocal(HYBRID_LOCAL), judge(fake), (0.3, 0.8)).check([SURE_FALSE, FAR, BARE], CheckContext())
    assert fake.calls == [] and [o.checker for o in out] == ["local"] * 3


async def test_hybrid_band_is_half_open():
    local = StubLocal({LONDON.text: (CONTRADICTED, 0.8), TALL.text: (CONTRADICTED, 0.3)})
    fake = FakeJudge(reply(v(1, "supported")))
    out = await HybridChecker(local, judge(fake), (0.3, 0.8)).check([LONDON, TALL], CheckContext())
    assert len(fake.calls) == 1 and TALL.text in fake.prompt() and LONDON.text not in fake.prompt()
    assert [o.checker for o in out] == ["local", "llm"]


async def test_hybrid_keeps_local_verdicts_when_the_judge_fails():
    local = StubLocal(HYBRID_LOCAL)
    ctx = CheckContext()
    hybrid = HybridChecker(local, judge(FakeJudge(("sleep", 1.0)), fallback=local, timeout_s=0.05), (0.3, 0.8))
    out = await hybrid.check([SURE_FALSE, UNSURE], ctx)
    assert [(o.label, o.confidence, o.checker) for o in out] == [(CONTRADICTED, 0.95, "local"), (CONTRADICTED, 0.55, "local")]
    assert out[1].note.startswith("fallback: ") and out[0].note == ""
    assert [e["reason"] for e in ctx.events] == ["timeout"]


def test_hybrid_rejects_a_bad_band():
    with pytest.raises(ValueError, match="uncertain_band"):
        HybridChecker(StubLocal(), StubLocal(), (0.8, 0.3))


# ----------------------------------------------------------------------------- through the proxy's upstream


@respx.mock
async def test_services_complete_raw_returns_usage_and_complete_still_returns_text():
    from ctxwarden.proxy.config import UpstreamConfig
    from ctxwarden.proxy.errors import ProxyError
    from ctxwarden.proxy.services import make_complete, make_complete_raw
    from ctxwarden.proxy.upstream.client import Upstream

    base = "http://upstream.test/v1"
    route = respx.post(f"{base}/chat/completions").mock(side_effect=[
        httpx.Response(200, json=reply(v(1, "supported"), total_tokens=77)),
        httpx.Response(200, json=reply(content="just text")),
        httpx.Response(500, json={"error": {}}),
    ])
    upstream = Upstream(UpstreamConfig(base_url=base, http_client="httpx", api_key_env=None, retries=0))
    complete_raw = make_complete_raw(upstream)
    exchange = SimpleNamespace(notes=SimpleNamespace(upstream_headers={"authorization": "Bearer sk-client"}))
    data = await complete_raw("judge-model", [{"role": "user", "content": "hi"}], exchange=exchange, temperature=0)
    assert data["usage"]["total_tokens"] == 77
    assert route.calls[0].request.headers["authorization"] == "Bearer sk-client"  # the proxy's upstream: the exchange's headers
    assert json.loads(route.calls[0].request.content)["temperature"] == 0
    assert await make_complete(upstream, complete_raw)("m", [{"role": "user", "content": "hi"}]) == "just text"
    with pytest.raises(ProxyError):
        await complete_raw("m", [{"role": "user", "content": "hi"}])
    await upstream.aclose()
