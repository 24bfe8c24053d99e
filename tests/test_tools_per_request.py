"""The tools policy's per-request work (issue 45, selection p50): what runs on every request of a
warm catalog is cheap, and gives what the slower code gave."""

from __future__ import annotations

import json

import numpy as np

from ctxwarden.policies.tools.selection import toolset_key
from ctxwarden.policies.tools.query import QueryPart, part_terms, weighted_terms
from ctxwarden.policies.tools.servers import NO_SERVER, in_use, server_groups, server_mask, sibling_boost
from ctxwarden.policies.tools.text import terms
from ctxwarden.policies.tools.usage import MIN_SESSIONS, SMOOTHING, UsageStats
from tests.tools_fixtures import all_tools


def test_server_mask_is_isin_without_the_sort():
    rng = np.random.default_rng(7)
    for _ in range(200):
        groups = rng.integers(-1, 12, size=int(rng.integers(0, 60)))
        wanted = {int(g) for g in rng.integers(-1, 14, size=int(rng.integers(0, 5)))}
        expected = np.isin(groups, [g for g in wanted if g != NO_SERVER])
        assert np.array_equal(server_mask(groups, wanted), expected)


def test_the_boosts_built_on_the_mask_are_unchanged():
    groups = np.array([0, 0, 1, NO_SERVER, 2, 1])
    scores = np.array([0.5, -0.2, 0.3, 0.4, 0.1, 0.2])
    boosted = sibling_boost(scores, groups, [0, 3], 0.1)  # the anchor with no server anchors nothing
    assert np.allclose(boosted, scores + 0.1 * np.maximum(scores, 0) * np.array([1, 1, 0, 0, 0, 0]))
    assert in_use(groups, [2, 3]).tolist() == [0, 0, 1, 1, 0, 1]  # a tool with no server: only itself


def test_a_parts_terms_are_split_once_and_weigh_as_before():
    request = "Find the cheapest flights from Paris to Berlin next Friday and book the earliest one " * 3
    step = "search_flights {\"origin\": \"CDG\", \"destination\": \"BER\"}"
    parts = [QueryPart("request", request, 1.0), QueryPart("assistant", step, 0.5)]
    naive: dict[str, float] = {}
    for part in parts:
        for term in terms(part.text):
            naive[term] = max(naive.get(term, 0.0), part.weight)
    assert weighted_terms(parts) == naive
    hits = part_terms.cache_info().hits
    weighted_terms([QueryPart("request", request, 1.0), QueryPart("result", "no flights on that day", 0.3)])
    assert part_terms.cache_info().hits == hits + 1  # the request's text, met again at the next step


def test_the_toolset_key_tells_lists_apart_and_equal_lists_alike():
    tools = json.loads(json.dumps(all_tools()))
    again = json.loads(json.dumps(all_tools()))
    assert toolset_key(tools) == toolset_key(again)
    again[3]["function"]["description"] += " "
    assert toolset_key(tools) != toolset_key(again)
    assert toolset_key(tools) != toolset_key(tools[:-1])
    assert toolset_key(tools) != toolset_key([*tools[1:], tools[0]])
    # JSON's types stay apart, and what orjson cannot write (an int past 64 bits, a value not from
    # JSON) is still keyed, by marshal then pickle
    bounded = [{"type": "function", "function": {"name": "f", "parameters": {"maximum": value}}}
               for value in (1, 1.0, True, 2**70, 2**70 + 1)]
    keys = [toolset_key([tool]) for tool in bounded] + [toolset_key([{"f": object()}])]
    assert len(set(keys[:5])) == 5 and keys[3] == toolset_key(json.loads(json.dumps([bounded[3]])))
    assert keys[5] != keys[0]


def _naive_popularity(stats: UsageStats, tenant: str, names: list[str | None]) -> np.ndarray:
    sessions = stats._counts.get((tenant, "sessions", ""), 0)
    if sessions < MIN_SESSIONS:
        return np.zeros(len(names))
    return np.array([stats._counts.get((tenant, "tool", n), 0) / (sessions + SMOOTHING) if n else 0.0 for n in names])


def _naive_shares(stats: UsageStats, tenant: str, names: list[str | None], groups: np.ndarray, servers: list[str]) -> np.ndarray:
    used = {g: n for g, s in enumerate(servers) if (n := stats._counts.get((tenant, "server", s), 0)) >= MIN_SESSIONS}
    return np.array([stats._counts.get((tenant, "tool", n), 0) / (used[int(g)] + SMOOTHING)
                     if n and int(g) in used else 0.0 for n, g in zip(names, groups)])


def test_usage_shares_read_only_the_counted_tools_and_equal_a_read_of_every_tool():
    rng = np.random.default_rng(3)
    names: list[str | None] = [f"s{k % 5}__t{k}" for k in range(40)] + [None, "s1__t3", "plain"]  # a nameless, a repeat
    groups, servers = server_groups(names)
    for max_entries in (10_000, 12):  # 12: counts are evicted, and evicted tools must read 0
        stats = UsageStats(max_entries=max_entries)
        for session in range(30):
            called = {str(names[int(i)]) for i in rng.integers(0, 43, size=3) if names[int(i)]}
            tenant = "acme" if session % 3 else "other"
            stats.count(tenant, called, {s.split("__")[0] for s in called if "__" in s}, new_session=True)
            for tenant in ("acme", "other", "none"):
                assert np.allclose(stats.popularity(tenant, names), _naive_popularity(stats, tenant, names))
                assert np.allclose(stats.shares(tenant, names, groups, servers),
                                   _naive_shares(stats, tenant, names, groups, servers))
