"""The `llm` and `hybrid` poisoning checkers end to end: the real proxy under uvicorn, the official
SDK as client, a real Chroma store, and the fake upstream scripted as both the answering model and
the judge (the judge's call goes through the proxy's upstream: the answer first, then the judge)."""

from __future__ import annotations

import json
import time

from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ctxwarden.proxy.fake_upstream import FakeUpstream
from ctxwarden.proxy.local_server import LocalServer
from tests.conftest import openai_client
from tests.test_poisoning_e2e import EIFFEL, admin_key, ask, load_kb, poisoning  # noqa: F401  (admin_key: autouse)

JUDGE = "judge-model"
WHERE = [{"role": "user", "content": "Where is the Eiffel Tower?"}]
WHEN = [{"role": "user", "content": "When was the Eiffel Tower built?"}]
LONDON = "The Eiffel Tower is located in London."
PARIS = "The Eiffel Tower is located in Paris."
BUILT = "The Eiffel Tower was built in 1889."  # the KB does not say: the local checker is unsure of it


def judged(*verdicts: tuple[str, float, int | None, str]) -> str:
    """The judge's JSON: one (verdict, confidence, evidence number, kind) per claim, in order."""
    return json.dumps({"verdicts": [{"index": i, "verdict": v, "confidence": c, "evidence": e, "kind": k}
                                    for i, (v, c, e, k) in enumerate(verdicts, 1)]})


def judge_requests(fake) -> list[dict]:
    return [r for r in fake.chat_requests if r.get("model") == JUDGE]


def claims_sent(request: dict) -> str:
    """The claims part of a judge request's prompt."""
    return request["messages"][-1]["content"].split("Claims:")[1]


def start(start_proxy, checker: str, exporter: InMemorySpanExporter | None = None, **judge):
    proxy = start_proxy(poisoning(checker=checker, judge={"model": JUDGE, "timeout_s": 2.0, **judge}),
                        span_processors=[SimpleSpanProcessor(exporter)] if exporter else None)
    load_kb(proxy)
    return proxy, openai_client(proxy)


def poisoning_events(exporter: InMemorySpanExporter, name: str) -> list[dict]:
    return [dict(e.attributes) for s in exporter.get_finished_spans() if s.name == "ctxwarden.policy poisoning"
            for e in s.events if e.name == name]


def test_llm_verdicts_decide_and_a_repeat_answer_is_cached(fake, start_proxy):
    exporter = InMemorySpanExporter()
    proxy, client = start(start_proxy, "llm", exporter)

    fake.reply(content=LONDON).reply(content=judged(("contradicted", 0.97, 1, "wrong_entity")))
    blocked, headers = ask(client, messages=WHERE)
    assert blocked.choices[0].finish_reason == "content_filter"
    assert "hallucination detected" in blocked.choices[0].message.content and EIFFEL in blocked.choices[0].message.content
    assert "poisoning.blocked" in headers["x-ctxwarden-actions"].split(",")
    assert [e["checker"] for e in poisoning_events(exporter, "poisoning.blocked")] == ["llm"]
    requests = judge_requests(fake)
    assert len(requests) == 1 and len(fake.chat_requests) == 2  # the answer, then ONE judge call
    assert requests[0]["response_format"]["json_schema"]["strict"] is True
    prompt = requests[0]["messages"][-1]["content"]
    assert "Question: Where is the Eiffel Tower?" in prompt and EIFFEL in prompt and LONDON in claims_sent(requests[0])

    fake.reply(content=LONDON)  # the same answer again: the cached verdict, no judge call
    again, _ = ask(client, messages=WHERE)
    assert again.choices[0].finish_reason == "content_filter"
    assert len(judge_requests(fake)) == 1 and len(fake.chat_requests) == 3

    fake.reply(content=PARIS).reply(content=judged(("supported", 0.95, 1, "none")))
    passed, headers = ask(client, messages=WHERE)
    assert passed.choices[0].message.content == PARIS and passed.choices[0].finish_reason == "stop"
    assert "poisoning" not in headers["x-ctxwarden-actions"] and "accuracy=1.00" in headers["x-ctxwarden-validation"]
    assert len(judge_requests(fake)) == 2


def test_llm_verdict_overrules_the_local_checker(fake, start_proxy):
    """The local checker alone blocks LONDON (see test_poisoning_e2e); the judge's word stands."""
    proxy, client = start(start_proxy, "llm")
    fake.reply(content=LONDON).reply(content=judged(("unverifiable", 0.9, None, "none")))
    answer, headers = ask(client, messages=WHERE)
    assert answer.choices[0].message.content == LONDON and answer.choices[0].finish_reason == "stop"
    assert "poisoning.blocked" not in headers["x-ctxwarden-actions"] and len(judge_requests(fake)) == 1


def test_llm_timeout_falls_back_to_the_local_checker(fake, start_proxy):
    exporter = InMemorySpanExporter()
    proxy, client = start(start_proxy, "llm", exporter, timeout_s=0.5)
    fake.reply(content=LONDON).reply(content=judged(("supported", 0.99, 1, "none")), delay_s=3)
    started = time.perf_counter()
    blocked, headers = ask(client, messages=WHERE)
    assert time.perf_counter() - started < 2.5  # the proxy stopped waiting for the judge after 0.5 s
    assert blocked.choices[0].finish_reason == "content_filter"  # the local checker's verdict
    labels = headers["x-ctxwarden-actions"].split(",")
    assert "poisoning.judge_fallback" in labels and "poisoning.blocked" in labels
    [fallback] = poisoning_events(exporter, "poisoning.judge_fallback")
    assert fallback["reason"] == "timeout" and fallback["model"] == JUDGE
    assert [e["checker"] for e in poisoning_events(exporter, "poisoning.blocked")] == ["local"]


def test_llm_bad_json_falls_back_to_the_local_checker(fake, start_proxy):
    exporter = InMemorySpanExporter()
    proxy, client = start(start_proxy, "llm", exporter)
    fake.reply(content=PARIS).reply(content="Looks right to me!")
    passed, headers = ask(client, messages=WHERE)
    assert passed.choices[0].message.content == PARIS
    assert "poisoning.judge_fallback" in headers["x-ctxwarden-actions"].split(",")

    wrong_count = judged(("supported", 0.9, 1, "none"), ("supported", 0.9, 1, "none"))  # two verdicts, one claim
    fake.reply(content=LONDON).reply(content=wrong_count)
    blocked, headers = ask(client, messages=WHERE)
    assert blocked.choices[0].finish_reason == "content_filter"
    assert "poisoning.judge_fallback" in headers["x-ctxwarden-actions"].split(",")
    assert [e["reason"] for e in poisoning_events(exporter, "poisoning.judge_fallback")] == ["bad_json", "bad_json"]

    fake.reply(content=LONDON).reply(status=500, json={"error": {"message": "judge down"}})
    blocked, headers = ask(client, messages=WHERE)  # a fallback is not cached: the judge is asked again
    assert blocked.choices[0].finish_reason == "content_filter" and len(judge_requests(fake)) == 3
    last = poisoning_events(exporter, "poisoning.judge_fallback")[-1]
    assert last["reason"] == "error" and last["status"] == 500


def test_hybrid_asks_the_judge_only_about_what_local_is_unsure_of(fake, start_proxy):
    exporter = InMemorySpanExporter()
    proxy, client = start(start_proxy, "hybrid", exporter)

    fake.reply(content=LONDON)  # the local checker is sure: no judge call
    blocked, _ = ask(client, messages=WHERE)
    assert blocked.choices[0].finish_reason == "content_filter" and judge_requests(fake) == []
    assert [e["checker"] for e in poisoning_events(exporter, "poisoning.blocked")] == ["local"]

    fake.reply(content=BUILT).reply(content=judged(("unverifiable", 0.8, None, "none")))
    passed, headers = ask(client, messages=WHEN)
    assert passed.choices[0].message.content == BUILT and passed.choices[0].finish_reason == "stop"
    assert "poisoning.blocked" not in headers["x-ctxwarden-actions"] and len(judge_requests(fake)) == 1

    both = f"{LONDON} {BUILT}"  # one sure claim, one unsure: only the unsure one is sent
    fake.reply(content=both).reply(content=judged(("unverifiable", 0.8, None, "none")))
    blocked, _ = ask(client, messages=WHERE)
    assert blocked.choices[0].finish_reason == "content_filter"
    sent = claims_sent(judge_requests(fake)[-1])
    assert len(judge_requests(fake)) == 2 and "built in 1889." in sent and "\n2." not in sent
    assert not any(line.endswith(LONDON) for line in sent.splitlines())  # LONDON appears only as context


def test_judge_endpoint_of_its_own_gets_its_env_key_not_the_clients(fake, start_proxy, monkeypatch):
    judge_upstream = FakeUpstream()
    server = LocalServer(judge_upstream.app()).start()
    try:
        monkeypatch.setenv("TEST_JUDGE_KEY", "sk-judge-from-env")
        proxy, _ = start(start_proxy, "llm", base_url=f"{server.url}/v1", api_key_env="TEST_JUDGE_KEY")
        client = openai_client(proxy, api_key="sk-client-secret")
        fake.reply(content=PARIS)
        judge_upstream.reply(content=judged(("contradicted", 0.95, 1, "wrong_entity")))
        blocked, _ = ask(client, messages=WHERE)
        assert blocked.choices[0].finish_reason == "content_filter"  # the judge's verdict, from its own endpoint
        assert judge_requests(fake) == [] and len(judge_upstream.chat_requests) == 1
        [received] = [r for r in judge_upstream.received if r.path.endswith("chat/completions")]
        assert received.headers["authorization"] == "Bearer sk-judge-from-env"
        assert "sk-client-secret" not in json.dumps(received.headers)
        assert fake.received[-1].headers["authorization"] == "Bearer sk-client-secret"  # the answer's call: the client's
    finally:
        server.stop()
