"""A client key's rate and daily budget where it can be cheated: requests in flight at once, two
processes on one storage path without Redis, and a proxy killed and started again. The counts
live in SQLite beside the keys (keys/usage_file.py), and an admitted request holds its estimated
prompt tokens on the budget until its answer is charged (keys/usage.py)."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor

import httpx

from ctxwarden.proxy.keys.records import make_key as new_key
from ctxwarden.proxy.keys.usage import LocalUsage
from ctxwarden.proxy.keys.usage_file import FileUsage
from ctxwarden.proxy.processes import start_replica
from tests.test_client_keys import CHAT, keyed, make_key  # noqa: F401  (keyed: the fixture)
from tests.test_client_keys_replicas import ADMIN, ENV, config

NOON = 86400 * 20_000 + 43_200.0  # a fixed instant, clear of a minute's or a day's edge


def record(**limits):
    return new_key("acme", **limits)[1]


def test_two_processes_on_one_file_share_a_keys_rate_and_budget_and_a_restart_keeps_them(tmp_path):
    key = record(requests_per_minute=3, tokens_per_day=100)

    async def run():
        a, b = FileUsage(tmp_path), FileUsage(tmp_path)
        refused = [(await usage.admit(key, 0, NOON))[0] for usage in (a, b, a, b)]
        assert [r is None for r in refused] == [True, True, True, False] and refused[3][0] == "rate_limit_exceeded"
        _, hold = await a.admit(key, 0, NOON + 60)
        await a.charge(key, 100, hold, NOON + 60)
        await a.aclose()
        again = FileUsage(tmp_path)  # the process started again
        refused, _ = await again.admit(key, 0, NOON + 120)
        assert refused is not None and refused[0] == "token_budget_exceeded"
        assert (await again.report([key.id]))[key.id]["tokens"] == 100
        refused, _ = await again.admit(key, 0, NOON + 86400)  # the next UTC day starts from nothing
        assert refused is None

    asyncio.run(run())


def test_requests_in_flight_hold_their_estimate_so_concurrent_ones_cannot_overspend():
    usage, key = LocalUsage(), record(tokens_per_day=250)

    async def run():
        holds = [await usage.admit(key, 100, NOON) for _ in range(5)]  # none charged yet: all in flight
        assert [h.tokens for refused, h in holds if refused is None] == [100, 100, 50]
        assert [refused[0] for refused, _ in holds[3:]] == ["token_budget_exceeded"] * 2
        await usage.charge(key, 30, holds[0][1], NOON + 1)  # it used less than its estimate: the rest comes back
        refused, hold = await usage.admit(key, 100, NOON + 2)
        assert refused is None and hold.tokens == 70

    asyncio.run(run())


def test_file_usage_holds_too(tmp_path):
    key = record(tokens_per_day=250)

    async def run():
        a, b = FileUsage(tmp_path), FileUsage(tmp_path)
        holds = [await usage.admit(key, 100, NOON) for usage in (a, b, a, b)]
        assert [h.tokens for _, h in holds] == [100, 100, 50, 0] and holds[3][0] is not None
        await b.charge(key, 30, holds[1][1], NOON + 1)
        assert (await a.admit(key, 100, NOON + 2))[1].tokens == 70

    asyncio.run(run())


def test_through_the_server_concurrent_requests_stop_at_the_budget(keyed, fake):
    proxy = keyed()
    secret, _ = make_key(proxy, tokens_per_day=300)
    body = {**CHAT, "messages": [{"role": "user", "content": "x" * 380}]}  # ~450 bytes: ~112 tokens held each
    for _ in range(6):
        fake.reply(delay_s=1.0)  # all six in flight at once

    def send(_):
        return httpx.post(f"{proxy.url}/v1/chat/completions", json=body, headers={"authorization": f"Bearer {secret}"},
                          timeout=30).status_code

    with ThreadPoolExecutor(6) as pool:
        codes = sorted(pool.map(send, range(6)))
    assert codes == [200, 200, 200, 429, 429, 429]  # before holds: six 200s, 6 x 13 tokens past a spent budget


def test_a_killed_proxy_started_again_and_a_second_process_keep_the_spent_budget(fake, tmp_path):
    shared = {"storage": {"path": str(tmp_path / "shared")}}
    a = start_replica(tmp_path, {**config(fake), **shared}, env=ENV)
    b = start_replica(tmp_path, {**config(fake), **shared}, env=ENV)
    try:
        made = httpx.post(f"{a.url}/admin/keys", headers=ADMIN, json={"tenant": "acme", "tokens_per_day": 12})
        assert made.status_code == 201, made.text
        made = made.json()
        headers = {"authorization": f"Bearer {made['key']}"}
        assert httpx.post(f"{a.url}/v1/chat/completions", json=CHAT, headers=headers).status_code == 200  # 13 tokens
        a.kill()  # kill -9: nothing flushed on the way out
        a = start_replica(tmp_path, {**config(fake), **shared}, env=ENV)
        for replica in (a, b):
            r = httpx.post(f"{replica.url}/v1/chat/completions", json=CHAT, headers=headers)
            assert r.status_code == 429 and r.json()["error"]["code"] == "token_budget_exceeded"
        listed = httpx.get(f"{b.url}/admin/keys", headers=ADMIN).json()["keys"]
        assert next(k for k in listed if k["id"] == made["id"])["usage"] == {
            "requests": 1, "tokens": 13, "last_used": listed[0]["usage"]["last_used"]}
        assert time.time() - listed[0]["usage"]["last_used"] < 60
    finally:
        a.stop()
        b.stop()
