"""Client keys across processes: two `ctxwarden serve` replicas sharing a real redis-server, and two
on one storage path without Redis. A key made on one is usable on the other at once; revoked on
one, it is refused by the other within a second; a rate holds across replicas."""

from __future__ import annotations

import time

import httpx
import pytest

from ctxwarden.proxy.processes import redis_command, start_redis, start_replica
from tests.conftest import clear_of_minute_edge, policies_off

ADMIN = {"authorization": "Bearer admin-k"}
CHAT = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
ENV = {"CTXWARDEN_ADMIN_KEY": "admin-k", "CTXW_TEST_PROVIDER_KEY": "sk-proxy-own"}


def config(fake, **extra) -> dict:
    return {"auth": {"mode": "keys"}, "policies": policies_off(),
            "upstream": {"base_url": f"{fake.url}/v1", "api_key_env": "CTXW_TEST_PROVIDER_KEY", "retries": 0}, **extra}


def revocation_is_seen(a, b) -> float:
    made = httpx.post(f"{a.url}/admin/keys", headers=ADMIN, json={"tenant": "acme"}).json()
    headers = {"authorization": f"Bearer {made['key']}"}
    assert httpx.post(f"{b.url}/v1/chat/completions", json=CHAT, headers=headers).status_code == 200  # at once
    httpx.delete(f"{a.url}/admin/keys/{made['id']}", headers=ADMIN).raise_for_status()
    revoked = time.monotonic()
    while httpx.post(f"{b.url}/v1/chat/completions", json=CHAT, headers=headers).status_code == 200:
        assert time.monotonic() - revoked < 1.0, "replica B still served the key a second after A revoked it"
        time.sleep(0.02)
    return time.monotonic() - revoked


@pytest.mark.skipif(redis_command() is None, reason="no redis-server (Debian: apt-get install -y redis-server)")
def test_with_redis_a_revoked_key_is_refused_by_the_other_replica_within_a_second(fake, tmp_path):
    redis = start_redis(tmp_path)
    url = f"redis://127.0.0.1:{redis.port}/0"
    a = start_replica(tmp_path, {**config(fake, state={"redis_url": url}), "storage": {"path": str(tmp_path / "a")}}, env=ENV)
    b = start_replica(tmp_path, {**config(fake, state={"redis_url": url}), "storage": {"path": str(tmp_path / "b")}}, env=ENV)
    try:
        assert revocation_is_seen(a, b) < 1.0
        made = httpx.post(f"{a.url}/admin/keys", headers=ADMIN, json={"tenant": "acme", "requests_per_minute": 3}).json()
        headers = {"authorization": f"Bearer {made['key']}"}
        clear_of_minute_edge()
        codes = [httpx.post(f"{r.url}/v1/chat/completions", json=CHAT, headers=headers).status_code for r in (a, b, a, b)]
        assert codes == [200, 200, 200, 429]  # one rate for the key, whichever replica answers
        listed = httpx.get(f"{b.url}/admin/keys", headers=ADMIN).json()["keys"]
        assert next(k for k in listed if k["id"] == made["id"])["usage"]["requests"] == 3
        # who made a stored Response is shared too (the replicas' storage paths differ: only Redis joins them)
        mine, other = ({"authorization": f"Bearer {httpx.post(f'{a.url}/admin/keys', headers=ADMIN, json={'tenant': t}).json()['key']}"}
                       for t in ("acme", "rival"))
        response = httpx.post(f"{a.url}/v1/responses", json={"model": "gpt-4o", "input": "hi"}, headers=mine).json()
        assert httpx.get(f"{b.url}/v1/responses/{response['id']}", headers=mine).status_code == 200
        assert httpx.get(f"{b.url}/v1/responses/{response['id']}", headers=other).status_code == 403
    finally:
        for process in (a, b, redis):
            process.stop()


def test_on_one_storage_path_a_revoked_key_is_refused_by_the_other_process_within_a_second(fake, tmp_path):
    shared = {"storage": {"path": str(tmp_path / "shared")}}
    a = start_replica(tmp_path, {**config(fake), **shared}, env=ENV)
    b = start_replica(tmp_path, {**config(fake), **shared}, env=ENV)
    try:
        assert revocation_is_seen(a, b) < 1.0
    finally:
        a.stop()
        b.stop()


@pytest.mark.skipif(redis_command() is None, reason="no redis-server (Debian: apt-get install -y redis-server)")
def test_keys_survive_a_redis_restarted_without_persistence(fake, tmp_path):
    """Redis comes back empty: the keys a replica had read are written back from its copy (a revoked
    one stays revoked), instead of every client getting 401 from then on."""
    redis = start_redis(tmp_path)
    url = f"redis://127.0.0.1:{redis.port}/0"
    a = start_replica(tmp_path, {**config(fake, state={"redis_url": url}), "storage": {"path": str(tmp_path / "a")}}, env=ENV)
    try:
        kept = httpx.post(f"{a.url}/admin/keys", headers=ADMIN, json={"tenant": "acme"}).json()
        revoked = httpx.post(f"{a.url}/admin/keys", headers=ADMIN, json={"tenant": "acme"}).json()
        httpx.delete(f"{a.url}/admin/keys/{revoked['id']}", headers=ADMIN).raise_for_status()
        ok, gone = ({"authorization": f"Bearer {k['key']}"} for k in (kept, revoked))
        assert httpx.post(f"{a.url}/v1/chat/completions", json=CHAT, headers=ok).status_code == 200
        redis.stop()
        redis = start_redis(tmp_path, port=redis.port)  # the same address, nothing in it (no persistence)
        codes = set()
        deadline = time.monotonic() + 2.0  # four of the gate's re-reads of the store
        while time.monotonic() < deadline:
            codes.add(httpx.post(f"{a.url}/v1/chat/completions", json=CHAT, headers=ok).status_code)
            time.sleep(0.1)
        assert codes == {200}, "the key was lost with Redis's data"
        assert httpx.post(f"{a.url}/v1/chat/completions", json=CHAT, headers=gone).status_code == 401
        listed = {k["id"]: k for k in httpx.get(f"{a.url}/admin/keys", headers=ADMIN).json()["keys"]}
        assert set(listed) == {kept["id"], revoked["id"]} and listed[revoked["id"]]["revoked_at"] is not None
        a.stop()  # a replica started afresh on the same path, after another wipe, restores from the copy on disk
        redis.stop()
        redis = start_redis(tmp_path, port=redis.port)
        a = start_replica(tmp_path, {**config(fake, state={"redis_url": url}), "storage": {"path": str(tmp_path / "a")}}, env=ENV)
        assert httpx.post(f"{a.url}/v1/chat/completions", json=CHAT, headers=ok).status_code == 200
    finally:
        a.stop()
        redis.stop()
