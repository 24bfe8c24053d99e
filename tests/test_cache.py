"""The one bounded cache every policy uses: count bound, idle expiry, eviction callbacks, threads."""

from __future__ import annotations

import threading

import pytest

from ctxwarden.policies.cache import LRU, stable_hash


def test_least_recently_used_goes_first():
    cache: LRU[str, int] = LRU(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # a is now the most recent
    cache.put("c", 3)
    assert cache.get("b") is None and cache.get("a") == 1 and cache.get("c") == 3 and len(cache) == 2


def test_idle_entries_expire_and_a_fresh_one_is_created():
    now = [0.0]
    cache: LRU[str, list] = LRU(10, ttl_s=5, clock=lambda: now[0])
    first = cache.get_or_create("s", list)
    first.append("x")
    now[0] = 4
    assert cache.get_or_create("s", list) is first  # touched at 4: alive until 9
    now[0] = 9.5
    assert cache.get("s") is None and len(cache) == 0
    assert cache.get_or_create("s", list) == []


def test_evictions_are_reported_but_pops_are_not():
    evicted: list[tuple[str, int]] = []
    cache: LRU[str, int] = LRU(1, on_evict=lambda k, v: evicted.append((k, v)))
    cache.put("a", 1)
    cache.put("b", 2)
    assert evicted == [("a", 1)]
    assert cache.pop("b") == 2 and evicted == [("a", 1)]


def test_none_values_are_cached_and_told_apart_from_misses():
    cache: LRU[str, None] = LRU(4)
    missing = object()
    cache.put("k", None)
    assert cache.get("k", missing) is None and cache.get("other", missing) is missing


def test_threads_never_push_it_past_its_bound():
    cache: LRU[int, int] = LRU(100)

    def writer(offset: int) -> None:
        for i in range(5_000):
            cache.put(offset + i, i)
            cache.get(offset + i // 2)

    threads = [threading.Thread(target=writer, args=(n * 10_000,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(cache) == 100


def test_a_cache_needs_room():
    with pytest.raises(ValueError):
        LRU(0)


def test_stable_hash_is_order_independent_for_mappings():
    assert stable_hash({"a": 1, "b": [1, 2]}) == stable_hash({"b": [1, 2], "a": 1})
    assert stable_hash("x") != stable_hash("y") and len(stable_hash("x")) == 24
