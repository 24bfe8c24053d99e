"""Two `ctxwarden serve` replicas behind one agent: a real redis-server (state.redis_url), a real
Chroma server (`chroma run`, storage.chroma_url), the official openai SDK alternating its requests
between the replicas, and the fake upstream on 127.0.0.1. Also: Redis stopped mid-run."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from ctxwarden.policies.history.scratchpad import archive_ref
from ctxwarden.proxy.processes import redis_command, start_chroma, start_redis, start_replica
from tests.conftest import openai_client, policies_off, running_fake
from tests.test_compression_e2e import REPORT, archived_conversation, window_for
from tests.test_loops_detect import A, B, convo
from tests.test_loops_e2e import TOOLS
from tests.tools_fixtures import all_tools, names

pytestmark = pytest.mark.skipif(redis_command() is None, reason="no redis-server (Debian: apt-get install -y redis-server)")

ADMIN_KEY = "replica-admin-key"
AUTH = {"authorization": f"Bearer {ADMIN_KEY}"}
SMALL_MODEL = "small-window-model"  # the archive acts only on this model's requests (budget pressure)
CAUTIOUS = {"enabled": True, "confidence_threshold": 1.0, "quarantine_band": [0.5, 1.0], "check_inputs": False}


def replica_policies() -> dict:
    policies = policies_off("loops", "clash", "poisoning", "archive", "tools")
    policies.update(loops={"enabled": True, "action": "inject", "max_retries": 2},
                    clash={"enabled": True, "strategy": "ask_user"}, poisoning=CAUTIOUS)
    return policies


@pytest.fixture(scope="module")
def fake():
    with running_fake() as upstream:  # one for the module: the replicas are started once
        yield upstream


@pytest.fixture(scope="module")
def topology(fake, tmp_path_factory):
    """Redis, a Chroma server and two replicas sharing both (started once for the module)."""
    work = tmp_path_factory.mktemp("replicas")
    redis, chroma = start_redis(work), start_chroma(work)
    config = {"upstream": {"base_url": f"{fake.url}/v1", "api_key_env": None, "retries": 0},
              "storage": {"chroma_url": chroma.url}, "state": {"redis_url": f"redis://127.0.0.1:{redis.port}/0"},
              "policies": replica_policies(),
              "models": {SMALL_MODEL: {"context_window": window_for(archived_conversation(), 0.87)}}}
    env = {"CTXWARDEN_ADMIN_KEY": ADMIN_KEY}
    replicas = []
    try:
        for name in ("a", "b"):
            replicas.append(start_replica(work, {**config, "storage": {**config["storage"], "path": str(work / name)}}, env=env))
        yield {"redis": redis, "chroma": chroma, "a": replicas[0], "b": replicas[1]}
    finally:
        for process in [*replicas, chroma, redis]:
            process.stop()


@pytest.fixture(autouse=True)
def fresh_script(fake):
    fake.reset()


def create(replica, messages, session: str, tenant: str = "acme", model: str = "gpt-4o", **kwargs):
    client = openai_client(replica)
    headers = {"x-ctxwarden-session": session, "x-ctxwarden-tenant": tenant}
    raw = client.chat.completions.with_raw_response.create(model=model, messages=messages, extra_headers=headers, **kwargs)
    return raw.parse(), raw.headers["x-ctxwarden-actions"].split(",")


def test_the_loop_guard_stops_at_the_same_step_as_one_replica(topology, fake):
    """inject: the note on A, then the loop the model carried on with is stopped by B."""
    def run(replicas, session):
        msgs, stopped_at = convo(A(), B(), A(), B(), A(), B()), None
        for step in range(4):
            fake.reply(tool_calls=[{"id": f"call_{session}_{step}", "name": "search_flights", "arguments": json.dumps(A()[1])}])
            answer, actions = create(replicas[step % len(replicas)], msgs, session, tools=TOOLS)
            if "loops.stop" in actions:
                stopped_at = step
                break
            call = answer.choices[0].message.tool_calls[0]
            msgs = [*msgs, {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
                    {"role": "tool", "tool_call_id": call.id, "content": A()[2]}]
        return stopped_at

    one = run([topology["a"]], "loop-one-replica")
    two = run([topology["a"], topology["b"]], "loop-two-replicas")
    assert one == two == 1  # noted at step 0 (on A), stopped at step 1 (on B: it knew of the note)


def test_the_retry_breaker_counts_refusals_made_on_either_replica(topology, fake):
    """Two quarantined answers in a row for one turn (on A, then B): the third attempt, on A, gets the
    error-state answer without calling the upstream."""
    r = httpx.post(f"{topology['a'].url}/admin/kb/documents", headers=AUTH, json={
        "tenant": "retry", "documents": [{"id": "inception", "text": "Inception is starring Leonardo DiCaprio."}]})
    assert r.status_code == 200, r.text
    messages = [{"role": "user", "content": "Who stars in Inception?"}]
    for replica in ("a", "b"):
        fake.reply(content="Inception is starring Tom Cruise.")
        _, actions = create(topology[replica], messages, "retries", tenant="retry")
        assert "poisoning.quarantined" in actions, actions
    calls = len(fake.chat_requests)
    answer, actions = create(topology["a"], messages, "retries", tenant="retry")
    assert "loops.retries_exhausted" in actions
    assert len(fake.chat_requests) == calls and "2 " in answer.choices[0].message.content


BUDGET_LUXURY = [
    {"role": "system", "content": "You are a travel agent."},
    {"role": "user", "content": "I'm planning a trip to Paris in May. I'm looking for budget hotels under $50 a night."},
    {"role": "assistant", "content": "Here are some budget options."},
    {"role": "user", "content": "Actually, I want a luxury 5-star hotel instead. What do you suggest?"},
]


def test_a_clash_question_asked_on_a_is_settled_by_the_answer_on_b(topology, fake):
    question, actions = create(topology["a"], BUDGET_LUXURY, "clash")
    assert "clash.ask_user" in actions and fake.chat_requests == []
    turn2 = [*BUDGET_LUXURY, {"role": "assistant", "content": question.choices[0].message.content},
             {"role": "user", "content": "2"}]
    fake.reply(content="Here are luxury hotels.")
    _, actions = create(topology["b"], turn2, "clash")
    assert "clash.user_answer" in actions and "clash.ask_user" not in actions
    assert "[no longer applies" in fake.chat_requests[0]["messages"][1]["content"]


def test_a_quarantine_item_approved_on_b_is_gone_on_a(topology, fake):
    r = httpx.post(f"{topology['a'].url}/admin/kb/documents", headers=AUTH, json={
        "tenant": "review", "documents": [{"id": "tower", "text": "The Eiffel Tower stands in Paris."}]})
    assert r.status_code == 200
    fake.reply(content="The Eiffel Tower stands in Berlin.")
    held, _ = create(topology["a"], [{"role": "user", "content": "Where is the Eiffel Tower?"}], "review", tenant="review")
    qid = held.choices[0].message.content.split("quarantine id ")[1].split(")")[0]
    pending = httpx.get(f"{topology['a'].url}/admin/quarantine?tenant=review", headers=AUTH).json()["data"]
    assert qid in [item["id"] for item in pending]
    assert httpx.post(f"{topology['b'].url}/admin/quarantine/{qid}/approve", headers=AUTH).status_code == 200
    pending = httpx.get(f"{topology['a'].url}/admin/quarantine?tenant=review", headers=AUTH).json()["data"]
    assert qid not in [item["id"] for item in pending if item.get("status", "pending") == "pending"]
    assert httpx.get(f"{topology['a'].url}/admin/quarantine/{qid}", headers=AUTH).json()["status"] == "approved"


def test_a_kb_document_replaced_on_a_is_used_by_b_within_a_second(topology, fake):
    def write(city: str):
        r = httpx.post(f"{topology['a'].url}/admin/kb/documents", headers=AUTH, json={
            "tenant": "kb", "documents": [{"id": "office", "text": f"Acme's head office is in {city}."}]})
        assert r.status_code == 200

    def check_on_b(session: str) -> list[str]:
        fake.reply(content="Acme's head office is in Berlin.")
        return create(topology["b"], [{"role": "user", "content": "Where is Acme's head office?"}], session, tenant="kb")[1]

    write("Mumbai")
    time.sleep(1.0)
    assert "poisoning.quarantined" in check_on_b("kb-1")  # B's index now holds Mumbai
    write("Berlin")
    time.sleep(1.0)
    assert "poisoning.quarantined" not in check_on_b("kb-2")


def test_the_dashboard_of_either_replica_counts_the_requests_of_both(topology, fake):
    def total(replica) -> float:
        return httpx.get(f"{topology[replica].url}/admin/stats?window=1h", headers=AUTH).json()["requests"]["total"]

    before = -1.0
    while before != total("a"):  # earlier tests' counts may still be on their way (flushed every 2 s)
        before = total("a")
        time.sleep(2.5)
    for i, replica in enumerate(("a", "b", "b", "b")):
        fake.reply(content=f"answer {i}")
        create(topology[replica], [{"role": "user", "content": f"count me {i}"}], "dashboard")
    deadline = time.monotonic() + 10  # each replica flushes its counts every 2 s
    while (total("a"), total("b")) != (before + 4, before + 4) and time.monotonic() < deadline:
        time.sleep(0.2)  # a replica's own counts show at once, the other's once flushed
    assert total("a") == total("b") == before + 4


def test_a_tool_result_archived_on_a_is_recalled_on_b(topology, fake):
    fake.reply(content="I have the ledger.")
    _, actions = create(topology["a"], archived_conversation(), "archive", model=SMALL_MODEL)
    ref = archive_ref(REPORT, "call_report")
    assert "archive.archive" in actions and f"ref={ref}" in fake.chat_requests[0]["messages"][3]["content"]
    # B never saw the report: its conversation only mentions the ref (as a client that kept the stub would)
    stubbed = [{"role": "user", "content": "What was the grand total?"},
               {"role": "assistant", "content": None, "tool_calls": [
                   {"id": "c1", "type": "function", "function": {"name": "get_ledger", "arguments": "{}"}}]},
               {"role": "tool", "tool_call_id": "c1", "content": f"[archived ledger: ref={ref}]"}]
    fake.reset()
    fake.reply(tool_calls=[{"name": "context_recall", "arguments": json.dumps({"ref": ref})}])
    fake.reply(content="48,213.55 EUR.")
    answer, _ = create(topology["b"], stubbed, "archive-b")
    assert answer.choices[0].message.content == "48,213.55 EUR."
    assert fake.chat_requests[1]["messages"][-1]["content"] == REPORT  # answered by B from the shared store


def test_the_tool_list_chosen_on_a_only_grows_on_b(topology, fake):
    """The forwarded tool list is append-only within a session (the prompt cache keeps its prefix):
    B starts from the list A chose, though the new request alone would rank other tools first."""
    tools = all_tools(45)
    turn = [{"role": "system", "content": "You are a helpful travel and office assistant."},
            {"role": "user", "content": "Plan my trip: a flight from Madrid to Berlin on Friday, then a hotel there."}]
    lists = []
    for replica, request in (("a", None), ("b", "What is my horoscope today? I am a Leo."),
                             ("a", "Define the word 'serendipity'.")):
        if request:
            turn += [{"role": "assistant", "content": "Done."}, {"role": "user", "content": request}]
        fake.reply(content="Done.")
        create(topology[replica], turn, "tool-list", tools=tools)
        lists.append([n for n in names(fake.chat_requests[-1]["tools"]) if n in names(tools)])
    assert 0 < len(lists[0]) < len(tools) and "get_horoscope" in lists[1] and "define_word" in lists[2]
    for before, after in zip(lists, lists[1:]):
        assert after[: len(before)] == before, (before, after)


def test_with_redis_hung_each_request_waits_at_most_its_timeout_and_says_degraded(topology, fake):
    """SIGSTOP: Redis keeps its port and connections but answers nothing. A call slower than
    state.timeout_s counts as down; the request goes on with per-process state."""
    a, b, redis = topology["a"], topology["b"], topology["redis"]
    redis.pause()
    try:
        for i, replica in enumerate((a, b, a)):
            fake.reply(content=f"hung {i}")
            started = time.monotonic()
            answer, actions = create(replica, [{"role": "user", "content": f"are you there {i}"}], "hung")
            assert answer.choices[0].message.content == f"hung {i}" and "state.degraded" in actions
            assert time.monotonic() - started < 2.0  # one 0.25 s timeout, not one per call
        for replica in (a, b):
            ready = httpx.get(f"{replica.url}/readyz")
            assert ready.status_code == 200 and ready.json()["state"] == "degraded"
    finally:
        redis.resume()
    for replica in (a, b):
        _wait_until_shared_again(replica)


def test_with_redis_stopped_every_request_succeeds_and_says_degraded(topology, fake):
    a, b, redis = topology["a"], topology["b"], topology["redis"]
    redis.kill()
    try:
        for i, replica in enumerate((a, b, a, b)):
            fake.reply(content=f"answer {i}")
            answer, actions = create(replica, [{"role": "user", "content": f"hello {i}"}], "degraded")
            assert answer.choices[0].message.content == f"answer {i}" and "state.degraded" in actions
        for replica in (a, b):
            ready = httpx.get(f"{replica.url}/readyz")
            assert ready.status_code == 200 and ready.json()["state"] == "degraded"
            assert _backend_up(replica) == 0.0
    finally:
        redis.start(lambda p: _pings(p))
    for replica in (a, b):
        _wait_until_shared_again(replica)


def _backend_up(replica) -> float:
    for line in httpx.get(f"{replica.url}/metrics").text.splitlines():
        if line.startswith("ctxwarden_state_backend_up"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError("no ctxwarden_state_backend_up in /metrics")


def _wait_until_shared_again(replica) -> None:
    """With no restart: /readyz says ok, the gauge is 1 and a request no longer reports degraded."""
    deadline = time.monotonic() + 5
    while httpx.get(f"{replica.url}/readyz").json()["state"] != "ok" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert httpx.get(f"{replica.url}/readyz").json()["state"] == "ok" and _backend_up(replica) == 1.0
    _, actions = create(replica, [{"role": "user", "content": "hello again"}], f"recovered-{replica.port}")
    assert "state.degraded" not in actions


def _pings(process) -> bool:
    import redis

    return bool(redis.Redis(port=process.port, socket_timeout=1).ping())
