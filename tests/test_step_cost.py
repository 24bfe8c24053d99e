"""Issue 45: the work per request of an agent loop follows what is new in it, not the whole history.

Each check here fails if a policy goes back to reading (or hashing, or parsing) every earlier
message of the turn on every request: the loop detector reads a bounded tail, the token counter's
key for a tool-calling message is built without JSON, and the poisoning verdicts' key hashes the
text's bytes (parts_hash) with no collision between differently split parts.
"""

from __future__ import annotations

import json
import sys
import time

import httpx
import pytest

from ctxwarden.policies.cache import parts_hash
from ctxwarden.policies.loops import detect
from ctxwarden.policies.loops.detect import find_loop
from ctxwarden.policies.text.tokens import TiktokenCounter
from tests.test_loops_detect import A, convo


def distinct(n: int) -> list:
    return [("fetch_page", {"page": i}, f"page {i}: {i * 7} rows") for i in range(n)]


def test_parts_hash_tells_apart_parts_split_differently_and_types():
    assert parts_hash("ab", "c") != parts_hash("a", "bc")
    assert parts_hash("1") != parts_hash(1)
    assert parts_hash("", "x") != parts_hash("x", "")
    assert parts_hash("t", 3, "tool", "text") == parts_hash("t", 3, "tool", "text")
    assert len(parts_hash("a\ud800b")) == 24  # a lone surrogate (valid in JSON) is hashed, not an error


def rounds_read(monkeypatch, earlier: int) -> list[int]:
    read: list[int] = []
    with monkeypatch.context() as patched:
        original = detect._round
        patched.setattr(detect, "_round", lambda messages, at, end: read.append(at) or original(messages, at, end))
        assert find_loop(convo(*distinct(earlier)), max_repeats=3, max_period=6) is None
    return read


def keys_read(monkeypatch, earlier: int) -> list[int]:
    read: list[int] = []
    with monkeypatch.context() as patched:
        original = detect.Rounds.keys_of
        patched.setattr(detect.Rounds, "keys_of", lambda self, i: read.append(self.said[i]) or original(self, i))
        assert find_loop(convo(*distinct(earlier)), max_repeats=3, max_period=6) is None
    return read


def test_the_loop_detector_reads_the_same_rounds_however_long_the_turn(monkeypatch):
    """Only the last max_period × max_repeats rounds can hold a cycle, and an agent at work (each
    call new) shows it no cycle by its newest rounds' calls against those a period before: ~7 rounds'
    keys are read, from their assistant messages alone, and no round's results are matched."""
    long, longer = keys_read(monkeypatch, 200), keys_read(monkeypatch, 2_000)
    assert len(set(long)) == len(set(longer)) <= 7 and len(long) == len(longer)
    assert rounds_read(monkeypatch, 200) == rounds_read(monkeypatch, 2_000) == rounds_read(monkeypatch, 10) == []


def test_rounds_whose_calls_repeat_are_read_whole_to_see_whether_they_brought_news(monkeypatch):
    read: list[int] = []
    with monkeypatch.context() as patched:
        original = detect._round
        patched.setattr(detect, "_round", lambda messages, at, end: read.append(at) or original(messages, at, end))
        polled = [("fetch_page", {"page": 1}, f"page 1: {i} rows") for i in range(3)]  # new results each time
        assert find_loop(convo(*distinct(50), *polled), max_repeats=3, max_period=6) is None
        assert len(read) == 2  # the newest two were compared: they differ, so it is progress, not a loop
        stuck = [("fetch_page", {"page": 1}, "page 1: 0 rows")] * 3
        assert find_loop(convo(*distinct(50), *stuck), max_repeats=3, max_period=6).kind == "repeat"


def test_a_loop_after_a_long_turn_is_reported_whole():
    loop = find_loop(convo(*distinct(100), *[A()] * 30), max_repeats=3, max_period=6)
    assert loop is not None and loop.kind == "repeat"
    assert loop.repeats == 30 and loop.tool_rounds == 130  # the whole turn is read once a loop is found


def test_a_long_turn_counts_every_tool_round():
    loop = find_loop(convo(*distinct(150)), max_repeats=3, max_period=6, max_tool_rounds=120)
    assert loop is not None and loop.kind == "rounds" and loop.tool_rounds == 150
    assert len(loop.history) == 10
    assert find_loop(convo(*distinct(150)), max_repeats=3, max_period=6, max_tool_rounds=150) is None


def test_tool_call_messages_are_counted_by_their_names_and_arguments():
    counter = TiktokenCounter()

    def call(args: str, call_id: str = "c1") -> dict:
        return {"role": "assistant", "content": None,
                "tool_calls": [{"id": call_id, "type": "function", "function": {"name": "search", "arguments": args}}]}

    short, long = call(json.dumps({"q": "x"})), call(json.dumps({"q": "x " * 50}))
    assert counter.count_message(short, "gpt-4o") < counter.count_message(long, "gpt-4o")
    assert counter.count_message(long, "gpt-4o") == TiktokenCounter().count_message(long, "gpt-4o")
    # the id is not counted: another id reuses the count, and gives the same number as a fresh count
    assert counter.count_message(call(json.dumps({"q": "x"}), "c2"), "gpt-4o") == TiktokenCounter().count_message(short, "gpt-4o")
    odd = {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {"a": 1}}}]}
    assert counter.count_message(odd, "gpt-4o") > 0  # arguments sent as an object: counted as their text


# ----------------------------------------------------------------------------- issue 43, fault 5: one cache budget


def test_the_cache_budget_scales_every_cache_bound_and_trims_the_caches_over_it():
    from ctxwarden.policies.cache import LRU, NOMINAL_CACHE_BYTES, cache_short, set_cache_budget
    from ctxwarden.policies.state import SessionLRU

    cache = LRU(1000, max_bytes=10_000, sizeof=lambda k, v: 1_000)
    state = SessionLRU(1000, None, encode=lambda s: s, decode=lambda d: d, max_bytes=10_000)
    for i in range(10):
        cache.put(i, "x")
        state.put(("t", str(i)), "y" * 50)  # ~760 bytes each (state_size): 7,600 in all
    assert len(cache) == 10 and len(state) == 10
    set_cache_budget(NOMINAL_CACHE_BYTES // 2)
    assert cache.max_bytes == 5_000 and len(cache) == 5 and cache.bytes == 5_000  # trimmed now, oldest out
    assert [k for k, _ in cache.items()] == [5, 6, 7, 8, 9]
    assert state.max_bytes == 10_000 and len(state) == 10  # session state is not a cache: its own bound
    later = LRU(1000, max_bytes=4_000, sizeof=lambda k, v: 1_000)  # made after: scaled too
    for i in range(4):
        later.put(i, "x")
    assert later.max_bytes == 2_000 and len(later) == 2

    calls = []

    @cache_short(100, max_bytes=4_000, sizeof=lambda args, value: 1_000)
    def square(n: int) -> int:
        calls.append(n)
        return n * n

    for n in range(4):
        square(n)
    square(0)  # 3 entries held (3,000 bytes) > 2,000: the memo starts again, so 0 is computed again
    assert calls == [0, 1, 2, 3, 0]
    set_cache_budget(None)
    assert cache.max_bytes == 10_000 and later.max_bytes == 4_000


def test_the_scratchpad_holds_its_share_of_the_cache_budget_counted_in_real_bytes():
    """The archived texts kept in front of Chroma are a cache like the others: scaled by the budget and
    counted in bytes, not characters (a 250,000-character text of emoji takes ~1 MB). Before, 32 M
    characters were kept whatever `server.cache_mb` said (its history transcripts were the largest Python
    growth tracemalloc showed under bench/fuzz.py)."""
    from types import SimpleNamespace

    from ctxwarden.policies.cache import NOMINAL_CACHE_BYTES, set_cache_budget
    from ctxwarden.policies.history import scratchpad

    services = SimpleNamespace(store=None, metrics=SimpleNamespace(add=lambda *a, **k: None, record=lambda *a, **k: None))
    pad = scratchpad.Scratchpad(services)  # type: ignore[arg-type]
    set_cache_budget(NOMINAL_CACHE_BYTES // 4)
    try:
        assert pad.max_memory_bytes() == scratchpad.MEMORY_BYTES // 4
        for i in range(40):  # 40 MB of text in all
            pad.put("t", f"tr_{i}", chr(0x1F600 + i % 50) * 250_000)
        held = [entry.text for entry in pad.memory.values()]
        assert pad.memory_bytes == sum(sys.getsizeof(text) for text in held) <= scratchpad.MEMORY_BYTES // 4
        assert 6 <= len(held) <= 8  # the newest ones, ~1 MB each
        assert list(pad.memory)[-1] == ("t", scratchpad.stored_id("tr_39", scratchpad.NO_OWNER))
    finally:
        set_cache_budget(None)
    assert pad.max_memory_bytes() == scratchpad.MEMORY_BYTES


def test_server_cache_mb_sets_the_budget_of_the_app_it_makes(fake):
    from ctxwarden.policies.cache import NOMINAL_CACHE_BYTES, cache_scale
    from ctxwarden.proxy.app import create_app
    from ctxwarden.proxy.config import load_settings

    app = create_app(load_settings(None, {"upstream": {"base_url": f"{fake.url}/v1", "api_key_env": None},
                                          "server": {"cache_mb": 35}}))
    assert cache_scale() == pytest.approx(35 * 2**20 / NOMINAL_CACHE_BYTES)
    verdicts = app.state.pipeline.policy("poisoning")._verdicts
    assert verdicts.max_bytes == int(verdicts.own_max_bytes * cache_scale())


def test_the_heap_is_trimmed_after_a_big_request_at_most_once_per_interval():
    from ctxwarden.proxy.memory_trim import HeapTrim

    now = [100.0]
    heap = HeapTrim(big_body_bytes=1000, min_interval_s=10, clock=lambda: now[0])
    trimmed: list[int] = []
    heap.trim = trimmed.append  # what glibc's malloc_trim would be called with

    class Ex:
        def __init__(self, size: int) -> None:
            self.body_bytes = size

    heap.after(Ex(999), "ok")
    assert trimmed == []  # a small request leaves the heap alone
    heap.after(Ex(5000), "ok")  # outside a request's event loop: trimmed in place
    assert trimmed == [0]
    now[0] += 5
    heap.after(Ex(5000), "rejected")
    assert trimmed == [0]  # within the interval
    now[0] += 6
    heap.after(Ex(5000), "ok")
    assert trimmed == [0, 0]
    heap.trim = None  # no malloc_trim (not glibc): nothing, no error
    now[0] += 60
    heap.after(Ex(5000), "ok")
    assert trimmed == [0, 0]


def test_many_mid_sized_bodies_add_up_to_a_trim():
    """20-900 KB bodies fragment the heap as a big one does: their sizes add up to a trim."""
    from ctxwarden.proxy.memory_trim import HeapTrim

    now = [100.0]
    heap = HeapTrim(big_body_bytes=1000, trim_after_bytes=2500, min_interval_s=10, clock=lambda: now[0])
    trimmed: list[int] = []
    heap.trim = trimmed.append

    class Ex:
        body_bytes = 900

    heap.after(Ex(), "ok")
    heap.after(Ex(), "ok")
    assert trimmed == []  # 1,800 bytes so far
    heap.after(Ex(), "ok")
    assert trimmed == [0]  # 2,700: trimmed, and the count starts again
    now[0] += 11
    heap.after(Ex(), "ok")
    heap.after(Ex(), "ok")
    assert trimmed == [0]


def test_the_server_trims_its_heap_after_a_big_body(fake):
    from ctxwarden.proxy.app import create_app
    from ctxwarden.proxy.config import load_settings
    from ctxwarden.proxy.local_server import LocalServer
    from ctxwarden.proxy.memory_trim import HeapTrim

    app = create_app(load_settings(None, {"upstream": {"base_url": f"{fake.url}/v1", "api_key_env": None}}))
    (heap,) = [listener.__self__ for listener in app.state.pipeline.listeners if isinstance(getattr(listener, "__self__", None), HeapTrim)]
    calls: list[int] = []
    heap.trim = calls.append

    with LocalServer(app) as proxy:
        small = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
        assert httpx.post(f"{proxy.url}/v1/chat/completions", json=small, timeout=60).status_code == 200
        assert calls == []
        big = {"model": "gpt-4o", "messages": [{"role": "user", "content": "status " * 200_000}]}
        assert httpx.post(f"{proxy.url}/v1/chat/completions", json=big, timeout=60).status_code in (200, 400)
        for _ in range(50):  # the trim runs in a worker thread after the answer
            if calls:
                break
            time.sleep(0.1)
    assert calls == [0]


def test_the_heap_is_trimmed_at_rest_once_bodies_add_up_and_once_more_after_the_writes_settle():
    """Chroma's writes (archive, memory) end after the request that asked for them and leave their
    pages in the heap: once the bodies since the last trim reach `idle_after_bytes`, a trim runs
    when no request has ended for `idle_s`, and once more `settle_s` later; a busy server is not
    trimmed between its requests."""
    import asyncio

    from ctxwarden.proxy.memory_trim import HeapTrim

    class Ex:
        def __init__(self, size: int) -> None:
            self.body_bytes = size

    async def scenario() -> tuple[list[int], list[int], list[int]]:
        heap = HeapTrim(big_body_bytes=10**9, trim_after_bytes=10**9, idle_after_bytes=1000, idle_s=0.4,
                        settle_s=0.5, min_idle_interval_s=0.0)
        trimmed: list[int] = []
        heap.trim = trimmed.append
        heap.after(Ex(600), "ok")
        await asyncio.sleep(0.6)
        below = list(trimmed)  # 600 bytes: nothing to give back
        for _ in range(10):  # busy: a request ends every 40 ms, 1,200+ bytes since the last trim
            heap.after(Ex(600), "ok")
            await asyncio.sleep(0.04)
        busy = list(trimmed)
        await asyncio.sleep(0.7)  # at rest: the first trim
        rested = list(trimmed)
        await asyncio.sleep(1.2)  # the settle trim, then nothing more
        return below, busy, rested + [len(trimmed)]

    below, busy, rested = asyncio.run(scenario())
    assert below == [] and busy == []
    assert rested[:-1] == [0] and rested[-1] == 2


def test_a_request_s_tool_catalog_is_serialized_once_by_every_policy_that_keys_it(fake, monkeypatch):
    """The budget, the history policy and the tools policy (in its worker thread) each key the request's
    catalog; 525 tools took ~0.5-0.65 ms to serialize each time in a busy server (bench/mcp_tools.py).
    The request's list is keyed once; an equal list in a later request is keyed again (a new object)."""
    from ctxwarden.policies.text import tokens
    from ctxwarden.proxy.app import create_app
    from ctxwarden.proxy.config import load_settings
    from ctxwarden.proxy.local_server import LocalServer

    keyed: list[int] = []
    original = tokens.content_key
    monkeypatch.setattr(tokens, "content_key", lambda value: keyed.append(len(value)) or original(value))
    catalog = [{"type": "function", "function": {"name": f"tool_{i}", "description": f"Does thing number {i} for the user.",
                                                 "parameters": {"type": "object", "properties": {"x": {"type": "string"}}}}}
               for i in range(60)]
    app = create_app(load_settings(None, {"upstream": {"base_url": f"{fake.url}/v1", "api_key_env": None}}))
    with LocalServer(app) as proxy:
        for step in range(2):
            body = {"model": "gpt-4o", "tools": catalog,
                    "messages": [{"role": "user", "content": f"Use thing number 7 for me, step {step}."}]}
            reply = httpx.post(f"{proxy.url}/v1/chat/completions", json=body, timeout=60)
            assert reply.status_code == 200
            assert "tools.confusion" in reply.headers.get("x-ctxwarden-actions", "")  # the tools policy did select
    assert keyed.count(len(catalog)) == 2  # once per request, though three policies asked for its key


def test_roles_picked_at_c_speed_are_compared_as_values_not_with_a_str_method():
    """`"user".__eq__(None)` is NotImplemented, which is true: a message whose role is not a string
    must not read as the user's (clash) or the model's (the loop detector)."""
    from ctxwarden.policies.clash.policy import user_texts
    from ctxwarden.policies.messages import is_role

    odd = [{"role": None, "content": "not the user"}, {"role": 3, "content": "nor this"},
           {"role": "user", "content": "the user"}]
    assert list(map(is_role("user"), [None, 3, "user", "assistant"])) == [False, False, True, False]
    assert user_texts(odd) == {(2, -1): "the user"}
    turn = [*convo(*distinct(2)), {"role": None, "tool_calls": [{"id": "x", "type": "function",
                                                                 "function": {"name": "a", "arguments": "{}"}}]}]
    assert find_loop(turn, max_repeats=2, max_period=1, max_tool_rounds=2) is None  # two rounds, not three
