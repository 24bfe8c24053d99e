"""The state backends: session documents through a real redis-server, the policies' codecs, and
degrading (Redis down or unreachable) without a failed request."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from ctxwarden.policies.base import Exchange, Services
from ctxwarden.policies.clash.state import Decision
from ctxwarden.policies.clash.state import SessionState as ClashState
from ctxwarden.policies.clash.state import decode as clash_decode
from ctxwarden.policies.clash.state import encode as clash_encode
from ctxwarden.policies.clash.state import merge_state as clash_merge
from ctxwarden.policies.loops.policy import LoopsConfig, LoopsPolicy
from ctxwarden.policies.loops.state import SessionState as LoopState
from ctxwarden.policies.loops.state import decode as loops_decode
from ctxwarden.policies.loops.state import encode as loops_encode
from ctxwarden.policies.loops.state import merge_state as loops_merge
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
                       judged={"h"}, judge_findings=[{"a": 1}], seen_weak={"w"}, notes={"k#0": ["Earlier ...", "And ..."]})
    back = through_json(clash_encode, clash_decode, state)
    assert back.decisions == {"c1": Decision("newer", "user")} and back.asked == {"c1", "c2"}
    assert (back.seen_duplicates, back.judged, back.judge_findings) == ({"d"}, {"h"}, [{"a": 1}])
    assert back.seen_weak == {"w"} and back.notes == {"k#0": ["Earlier ...", "And ..."]}  # a note keeps its bytes
    older = through_json(clash_encode, clash_decode, ClashState())
    assert older.notes == {} and older.seen_weak == set()


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
        calls: list[str] = []

        async def hgetall(key: str) -> dict[str, str]:
            calls.append(key)
            return {}

        state.client.hgetall = hgetall  # type: ignore[method-assign]
        await sync.load(exchange())  # degraded: Redis is not even tried (a call, not a time: timings flake under load)
        assert calls == []
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


@needs_redis
def test_a_burst_of_more_requests_than_connections_waits_for_one_and_stays_shared(redis_url):
    """More concurrent session loads than the pool has connections: each waits for a free one; none
    is refused with "Too many connections", so the backend is not marked down."""
    from ctxwarden.proxy.state.backends import MAX_CONNECTIONS

    async def run():
        # a generous per-call timeout: opening 128 connections at once on a loaded 2-core machine can take
        # longer than the default 0.25 s, and this test is about waiting for the pool, not connect speed
        state = RedisState(StateConfig(redis_url=redis_url, timeout_s=2.0), Metrics())
        loaded = await asyncio.gather(*[state.load_session(f"burst:{i}") for i in range(3 * MAX_CONNECTIONS)])
        assert [doc for doc in loaded if doc is None] == [] and state.status == "ok", state.last_error
        await state.aclose()

    asyncio.run(run())


# ---------------------------------------------------------------------- concurrent replicas: compare-and-set


class StatePolicy:
    """A stateful policy as SessionSync sees it: a name and a SessionLRU."""

    def __init__(self, name: str, states: SessionLRU) -> None:
        self.name, self.session_states = name, states


def replicas(redis_url: str, make_policy, n: int = 3) -> tuple[list[RedisState], list, list[SessionSync]]:
    """n replicas sharing one Redis, each with its own backend, policy and SessionSync."""
    backends = [RedisState(StateConfig(redis_url=redis_url), Metrics()) for _ in range(n)]
    policies = [make_policy() for _ in range(n)]
    return backends, policies, [SessionSync(b, [p]) for b, p in zip(backends, policies)]


async def close(backends) -> None:
    await asyncio.gather(*(backend.aclose() for backend in backends))


def loops_policy() -> LoopsPolicy:
    return LoopsPolicy(LoopsConfig(max_retries=5), Services(tokens=None, metrics=Metrics()))  # type: ignore[arg-type]


async def refuse(policy: LoopsPolicy, ex: Exchange, by: str) -> None:
    """The exchange was refused by policy `by`: the loops policy counts it (its retry guard)."""
    ex.record(by, "reject")
    ex.notes.verdict_by = by
    await policy.on_complete(ex, "rejected")


@needs_redis
def test_two_replicas_counting_a_refusal_at_once_both_count(redis_url):
    """Each replica adds 1 to the retry guard's counter of the same session at the same moment:
    the stored counter grows by 2 (last write wins would leave it at +1)."""
    async def run():
        backends, policies, syncs = replicas(redis_url, loops_policy)
        seed = exchange("count-at-once")
        await syncs[0].load(seed)
        await refuse(policies[0], seed, "budget")
        await syncs[0].save(seed)
        a, b = exchange("count-at-once"), exchange("count-at-once")
        await asyncio.gather(syncs[0].load(a), syncs[1].load(b))  # both start from failures == 1
        await refuse(policies[0], a, "poisoning")
        await refuse(policies[1], b, "budget")
        await asyncio.gather(syncs[0].save(a), syncs[1].save(b))
        check = exchange("count-at-once")
        await syncs[2].load(check)
        stored = policies[2].memory.get(check.session_key)
        assert stored.failures == 3 and sorted(stored.failure_reasons) == ["budget.reject", "budget.reject", "poisoning.reject"]
        assert (a.action_labels() + b.action_labels()).count("state.merged") == 1  # the second writer merged
        await close(backends)

    asyncio.run(run())


def test_the_loops_merge_adds_both_deltas_and_never_goes_below_zero():
    base, mine, theirs = LoopState(2, ["x", "y"], "t"), LoopState(3, ["x", "y", "m"], "t2"), LoopState(4, ["x", "y", "t"], "t")
    merged = loops_merge(base, mine, theirs)
    assert (merged.failures, merged.failure_reasons, merged.failed_turn) == (5, ["x", "y", "t", "m"], "t2")
    reset = loops_merge(base, LoopState(), LoopState(2, ["x", "y"], "t"))  # mine succeeded: reset
    assert (reset.failures, reset.failure_reasons, reset.failed_turn) == (0, [], None)
    fresh = loops_merge(None, LoopState(1, ["m"], "t"), LoopState(1, ["t"], "t"))  # base unknown: empty
    assert fresh.failures == 2


@needs_redis
def test_a_frozen_decision_written_first_is_kept_and_the_second_writer_adopts_it(redis_url):
    """Two replicas resolve the same clash differently at once: the first write stands, the second
    replica takes it as its own; a clash only the second decided is kept too (union)."""
    def clash_policy():
        return StatePolicy("clash", SessionLRU(100, 60, encode=clash_encode, decode=clash_decode, merge=clash_merge))

    async def run():
        backends, policies, syncs = replicas(redis_url, clash_policy)
        a, b = exchange("frozen"), exchange("frozen")
        await syncs[0].load(a)
        await syncs[1].load(b)
        policies[0].session_states.put(a.session_key, ClashState(decisions={"c1": Decision("newer", "user")}))
        policies[1].session_states.put(b.session_key, ClashState(decisions={"c1": Decision("older", "keep_existing"),
                                                                            "c2": Decision("both", "merge")}))
        await syncs[0].save(a)
        await syncs[1].save(b)
        adopted = policies[1].session_states.get(b.session_key).decisions
        assert adopted == {"c1": Decision("newer", "user"), "c2": Decision("both", "merge")}
        check = exchange("frozen")
        await syncs[2].load(check)
        assert policies[2].session_states.get(check.session_key).decisions == adopted
        await close(backends)

    asyncio.run(run())


@needs_redis
def test_without_a_merge_the_first_writer_wins_and_the_second_adopts_it(redis_url):
    async def run():
        backends, policies, syncs = replicas(redis_url, lambda: Policy("plain"))
        a, b = exchange("first-wins"), exchange("first-wins")
        await asyncio.gather(syncs[0].load(a), syncs[1].load(b))
        policies[0].session_states.put(a.session_key, {"frozen": "A"})
        policies[1].session_states.put(b.session_key, {"frozen": "B"})
        await syncs[0].save(a)
        await syncs[1].save(b)
        assert policies[1].session_states.get(b.session_key) == {"frozen": "A"}
        assert b.action_labels() == ["state.merged"]
        check = exchange("first-wins")
        await syncs[2].load(check)
        assert policies[2].session_states.get(check.session_key) == {"frozen": "A"}
        await close(backends)

    asyncio.run(run())


@needs_redis
def test_a_tool_list_merged_stays_append_only_with_both_additions(redis_url):
    async def run():
        loadouts = [Loadouts(100, 60) for _ in range(3)]
        each = iter(loadouts)
        backends, _, syncs = replicas(redis_url, lambda: StatePolicy("tools", next(each).states))
        seed, a, b, check = (exchange("tool-list") for _ in range(4))
        await syncs[0].load(seed)
        loadouts[0].put(seed.session_key, Loadout(["a", "b"], "r1", {"a"}))
        await syncs[0].save(seed)
        await asyncio.gather(syncs[0].load(a), syncs[1].load(b))
        available = {"a", "b", "c", "d", "e"}
        assert loadouts[0].append(a.session_key, ["c"], available) == ["c"]
        assert loadouts[1].append(b.session_key, ["d", "e"], available) == ["d", "e"]
        await syncs[0].save(a)
        await syncs[1].save(b)
        await syncs[2].load(check)
        assert loadouts[2].get(check.session_key).names == loadouts[1].get(b.session_key).names == ["a", "b", "c", "d", "e"]
        await close(backends)

    asyncio.run(run())


def test_the_tools_merge_keeps_their_order_and_appends_mine():
    states = Loadouts(10, 60).states
    theirs = Loadout(["a", "x", "b"], "r2", {"x"})
    states.put("s", Loadout(["a", "b", "m"], "r1", {"m"}))
    states.reconcile("s", json.dumps({"names": ["a", "b"], "request": "r1", "counted": []}),
                     json.dumps({"names": theirs.names, "request": theirs.request, "counted": ["x"]}))
    assert states.get("s") == Loadout(["a", "x", "b", "m"], "r2", {"x", "m"})


@needs_redis
def test_state_changed_during_an_outage_survives_recovery(tmp_path):
    """Redis hangs; A counts a refusal in its own process; Redis answers again: A's next request
    merges its count with the (older) stored one instead of being overwritten by it."""
    process = start_redis(tmp_path)

    async def run():
        url = f"redis://127.0.0.1:{process.port}/0"
        backends = [RedisState(StateConfig(redis_url=url, timeout_s=0.2), Metrics()) for _ in range(2)]
        policies = [loops_policy(), loops_policy()]
        a, b = [SessionSync(backend, [policy]) for backend, policy in zip(backends, policies)]
        ex = exchange("outage")
        await a.load(ex)
        await refuse(policies[0], ex, "budget")
        await a.save(ex)  # stored: failures == 1
        process.pause()
        try:
            down = exchange("outage")
            await a.load(down)
            assert down.action_labels() == ["state.degraded"]
            await refuse(policies[0], down, "poisoning")
            await a.save(down)  # kept here: failures == 2
        finally:
            process.resume()
        await backends[0].poll_once()
        assert backends[0].status == "ok"
        back = exchange("outage")
        await a.load(back)
        assert policies[0].memory.get(back.session_key).failures == 2  # not the stored 1
        await a.save(back)
        check = exchange("outage")
        await b.load(check)
        stored = policies[1].memory.get(check.session_key)
        assert stored.failures == 2 and stored.failure_reasons == ["budget.reject", "poisoning.reject"]
        await close(backends)

    try:
        asyncio.run(run())
    finally:
        process.stop()


@needs_redis
def test_an_outage_merge_counts_what_another_replica_wrote_meanwhile_once(redis_url):
    """A is cut off (its backend degraded) while B keeps writing: after recovery the counter holds
    the stored count plus A's own increments, not A's whole count added again."""
    async def run():
        backends, policies, syncs = replicas(redis_url, loops_policy, 2)
        seed = exchange("partition")
        await syncs[0].load(seed)
        await refuse(policies[0], seed, "budget")
        await syncs[0].save(seed)  # both replicas know failures == 1
        backends[0]._mark(False, ConnectionError("partition"))
        down, meanwhile = exchange("partition"), exchange("partition")
        await syncs[0].load(down)
        await refuse(policies[0], down, "poisoning")
        await syncs[0].save(down)
        await syncs[1].load(meanwhile)
        await refuse(policies[1], meanwhile, "budget")
        await syncs[1].save(meanwhile)  # stored: failures == 2
        await backends[0].poll_once()
        back = exchange("partition")
        await syncs[0].load(back)
        await syncs[0].save(back)
        assert policies[0].memory.get(back.session_key).failures == 3  # 1 + A's 1 + B's 1
        check = exchange("partition")
        await syncs[1].load(check)
        assert policies[1].memory.get(check.session_key).failures == 3
        await close(backends)

    asyncio.run(run())
