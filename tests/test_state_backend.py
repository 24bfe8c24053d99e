"""The state backends: session documents through a real redis-server, the policies' codecs, and
degrading (Redis down or unreachable) without a failed request."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from ctxwarden.policies.base import Exchange
from ctxwarden.policies.clash.state import Decision
from ctxwarden.policies.clash.state import SessionState as ClashState
from ctxwarden.policies.clash.state import decode as clash_decode
from ctxwarden.policies.clash.state import encode as clash_encode
from ctxwarden.policies.loops.state import SessionState as LoopState
from ctxwarden.policies.loops.state import decode as loops_decode
from ctxwarden.policies.loops.state import encode as loops_encode
from ctxwarden.policies.state import LocalVersions, SessionLRU
from ctxwarden.policies.tools.loadout import Loadout, Loadouts
from ctxwarden.proxy.config import StateConfig
from ctxwarden.proxy.local_server import free_port
from ctxwarden.proxy.metrics import Metrics
from ctxwarden.proxy.processes import redis_command, start_redis
from ctxwarden.proxy.state import LocalState, RedisState, SessionSync, build_state
from ctxwarden.proxy.state.sessions import session_scope

needs_redis = pytest.mark.skipif(redis_command() is None, reason="no redis-server (Debian: apt-get install -y redis-server)")


def through_json(encode, decode, state):
    return decode(json.loads(json.dumps(encode(state))))


def test_loops_state_survives_the_trip_through_a_document():
    state = LoopState(failures=2, failure_reasons=["poisoning.blocked", "budget.reject"], failed_turn="t1")
    state.remember_note("k1", 3)
    state.remember_note("k2", 5)
    back = through_json(loops_encode, loops_decode, state)
    assert (back.failures, back.failure_reasons, back.failed_turn) == (2, ["poisoning.blocked", "budget.reject"], "t1")
    assert back.notes.items() == [("k1", 3), ("k2", 5)]


def test_clash_state_survives_the_trip_through_a_document():
    state = ClashState(decisions={"c1": Decision("newer", "user")}, asked={"c1", "c2"}, seen_duplicates={"d"},
                       judged={"h"}, judge_findings=[{"a": 1}])
    back = through_json(clash_encode, clash_decode, state)
    assert back.decisions == {"c1": Decision("newer", "user")} and back.asked == {"c1", "c2"}
    assert (back.seen_duplicates, back.judged, back.judge_findings) == ({"d"}, {"h"}, [{"a": 1}])


def test_a_tool_loadout_survives_the_trip_and_unreadable_documents_keep_the_local_state():
    loadouts = Loadouts(10, 60)
    loadouts.put(("t", "s"), Loadout(["a", "b"], "req", {"a"}))
    doc = loadouts.states.export(("t", "s"))
    other = Loadouts(10, 60)
    other.states.hydrate(("t", "s"), doc)
    assert other.get(("t", "s")) == Loadout(["a", "b"], "req", {"a"})
    other.states.hydrate(("t", "s"), '{"names": 3}')  # another version's document: ignored, logged
    assert other.get(("t", "s")) == Loadout(["a", "b"], "req", {"a"})
    other.states.hydrate(("t", "s"), None)  # nothing shared yet: the local entry stays
    assert other.get(("t", "s")).names == ["a", "b"]


def test_local_state_is_the_default_and_shares_nothing():
    state = build_state(StateConfig(), Metrics())
    assert isinstance(state, LocalState) and not state.shared and state.status == "local"
    assert state.publish("kb:x") == 1 and state.current("kb:x") == 1 and state.current("kb:y") == 0


class Policy:
    def __init__(self, name: str) -> None:
        self.name = name
        self.session_states = SessionLRU(100, 60, encode=lambda s: s, decode=lambda d: d)


def exchange(session: str = "s1", tenant: str | None = "acme") -> Exchange:
    return Exchange("r", "gpt-4o", [], None, {}, tenant=tenant, session_id=session)


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    if redis_command() is None:
        pytest.skip("no redis-server")
    process = start_redis(tmp_path_factory.mktemp("redis"))
    yield f"redis://127.0.0.1:{process.port}/0"
    process.stop()


@needs_redis
def test_two_replicas_hand_session_state_to_each_other(redis_url):
    async def run():
        one, two = RedisState(StateConfig(redis_url=redis_url), Metrics()), RedisState(StateConfig(redis_url=redis_url), Metrics())
        p1, p2 = Policy("loops"), Policy("loops")
        s1, s2 = SessionSync(one, [p1]), SessionSync(two, [p2])
        ex = exchange()
        await s1.load(ex)
        p1.session_states.put(ex.session_key, {"failures": 1})
        await s1.save(ex)
        ex2 = exchange()
        await s2.load(ex2)
        assert p2.session_states.get(ex2.session_key) == {"failures": 1}
        assert ex2.actions == []  # not degraded
        other_tenant = exchange(tenant="acme2")
        await s2.load(other_tenant)
        assert p2.session_states.get(other_tenant.session_key) is None  # scoped by tenant
        await one.aclose()
        await two.aclose()

    asyncio.run(run())


@needs_redis
def test_versions_published_by_one_replica_reach_another_within_a_poll(redis_url):
    async def run():
        config = StateConfig(redis_url=redis_url, poll_s=0.05)
        one, two = RedisState(config, Metrics()), RedisState(config, Metrics())
        await two.start()
        before = two.current("kb:acme")
        version = await asyncio.to_thread(one.publish, "kb:acme")
        deadline = time.monotonic() + 1
        while two.current("kb:acme") != version and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert version == before + 1 and two.current("kb:acme") == version
        await one.aclose()
        await two.aclose()

    asyncio.run(run())


def test_an_unreachable_redis_degrades_fast_and_is_then_skipped():
    async def run():
        port = free_port()  # nothing listens there
        metrics = Metrics()
        state = RedisState(StateConfig(redis_url=f"redis://127.0.0.1:{port}/0", timeout_s=0.2), metrics)
        sync = SessionSync(state, [Policy("loops")])
        ex = exchange()
        started = time.perf_counter()
        await sync.load(ex)
        assert time.perf_counter() - started < 1.0
        assert ex.action_labels() == ["state.degraded"] and state.status == "degraded"
        assert state.publish("kb:x") == 0  # not published, never raised
        started = time.perf_counter()
        await sync.load(exchange())  # degraded: Redis is not even tried
        assert time.perf_counter() - started < 0.01
        gauges = [p for p in metrics.snapshot() if p["name"] == "ctxwarden.state.backend_up"]
        assert gauges and gauges[0]["value"] == 0
        await state.aclose()

    asyncio.run(run())


def test_session_scopes_are_injective_in_tenant_and_session():
    scopes = {session_scope(exchange(s, t)) for s in ("a", "a:b", "b") for t in (None, "acme", "acme.", "a")}
    assert len(scopes) == 12


def test_local_versions_take_what_the_backend_says_even_when_lower():
    versions = LocalVersions()
    versions.seen("kb", 4)
    assert versions.current("kb") == 4
    versions.seen("kb", 1)  # Redis restarted without persistence and counted again
    assert versions.current("kb") == 1
