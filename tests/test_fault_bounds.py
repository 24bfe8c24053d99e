"""Issue 43: big fields answer in seconds, and every cache is bounded by bytes (not only entries).

Fault 1: a fuzzed body with a 20 KB-1.5 MB string in any field (a tool's description, tool-call
arguments, thousands of small messages) got no answer within 10 s: the scratchpad wrote each
archived span in its own Chroma upsert, which holds the GIL (~35 ms each, 700 of them for a long
history replayed), and the history policy had no time budget. Fault 5: RSS rose ~25 MB per 1,000
varied requests: caches bounded by entry count only, or sized far below what their entries hold.
bench/fuzz.py measures both over 10,000 bodies on the three APIs.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import httpx

from ctxwarden.policies.cache import LRU, cache_short
from ctxwarden.policies.state import SessionLRU

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import fuzz_bodies

BIG = 1_500_000


# ---------------------------------------------------------------------------- caches, by bytes


def test_a_memo_is_cleared_once_its_entries_pass_its_bytes():
    calls: list[int] = []

    @cache_short(maxsize=10_000, max_bytes=100_000, sizeof=lambda args, value: len(value))
    def make(n: int) -> str:
        calls.append(n)
        return "x" * 10_000

    for n in range(50):  # 10,000 entries would fit the count; 500 KB does not fit the bytes
        assert make(n) == "x" * 10_000
        assert make.held_bytes() <= 100_000 + 10_000
    assert make.cache_info().currsize <= 11
    assert make(49) and calls.count(49) == 1  # a recent one is still kept


def _deep_size(value: object, seen: set[int]) -> int:
    """Bytes reachable from `value` (each object once): what a cache entry really holds."""
    if id(value) in seen or isinstance(value, (type, bool, type(None))):
        return 0
    seen.add(id(value))
    size = sys.getsizeof(value)
    if isinstance(value, dict):
        return size + sum(_deep_size(k, seen) + _deep_size(v, seen) for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        return size + sum(_deep_size(v, seen) for v in value)
    return size + (_deep_size(vars(value), seen) if hasattr(value, "__dict__") else 0)


def test_statements_are_sized_close_to_what_they_hold():
    """The clash policy's statement cache and the reader's memo count this size: it was 1 KB a
    statement, a quarter of what one holds (its 32 MB held ~140 MB)."""
    from ctxwarden.policies.text.statements.extract import extract, statements_size

    for kind in ("words", "lines", "json", "chars"):
        found = extract(fuzz_bodies.big_text(kind, 3_000, 7))
        real = _deep_size(found, set())
        assert 0.5 * real < statements_size(found) < 2 * real, (kind, statements_size(found), real)


def test_a_session_state_that_grows_in_place_is_sized_again():
    states: SessionLRU[dict] = SessionLRU(1000, None, encode=lambda s: s, decode=dict, max_bytes=200_000)
    for i in range(20):
        state = states.get_or_create(("t", f"s{i}"), dict)
        state["notes"] = ["a note the policy added " * 40] * 20  # ~20 KB of JSON, ×3: ~60 KB
        states.remeasure(("t", f"s{i}"))  # the pipeline does this when the request ends
        assert states.bytes <= 200_000
    assert len(states) <= 4 and states.get(("t", "s19")) is not None and states.get(("t", "s0")) is None
    states.get_or_create(("t", "huge"), dict)["blob"] = "x" * 100_000
    states.remeasure(("t", "huge"))  # bigger than the bound alone: not kept
    assert states.get(("t", "huge")) is None and states.bytes <= 200_000


def test_the_pipeline_sizes_session_states_when_a_request_ends():
    from ctxwarden.proxy.state.sessions import SessionSync

    states: SessionLRU[dict] = SessionLRU(1000, None, encode=lambda s: s, decode=dict, max_bytes=10_000)
    sync = SessionSync(None, [SimpleNamespace(name="p", session_states=states)])  # type: ignore[arg-type]
    ex = SimpleNamespace(session_key=("t", "s"))
    states.get_or_create(ex.session_key, dict)["big"] = "x" * 20_000
    sync.remeasure(ex)  # type: ignore[arg-type]
    assert states.get(ex.session_key) is None and states.bytes == 0


def test_tool_facts_catalog_and_query_vectors_are_bounded_by_bytes():
    from ctxwarden.policies.tools.facts import FactsCache

    facts = FactsCache(max_entries=20_000, max_bytes=2_000_000)
    for i in range(40):  # a 64 KB tool name each: ~200 KB of facts
        facts.facts([{"type": "function", "function": {"name": f"t{i}_" + "a" * 65_536, "description": "d"}}])
        assert facts._items.bytes <= 2_000_000
    assert len(facts._items) < 40


def test_the_embedding_cache_is_bounded_by_bytes():
    from ctxwarden.proxy.embeddings import CachedEmbedder

    class Fake(CachedEmbedder):
        def _embed_uncached(self, texts: list[str]) -> list[list[float]]:
            return [[1.0] * self.dim for _ in texts]

    embedder = Fake("fake", 1024, cache_size=20_000, max_bytes=1_000_000)  # ~4.3 KB an entry
    embedder.embed([f"text {i}" for i in range(1000)])
    assert embedder._cache.bytes <= 1_000_000 and len(embedder._cache) < 250


def test_the_tokenizer_keeps_no_native_copy_of_each_text_it_embeds():
    """wordllama's tokenizer (HF `tokenizers`, BPE with no pre-tokenizer) cached every distinct text
    under 256 bytes in native memory, 10,000 per thread, outside every budget: 3,000 short texts took
    +8 MB of glibc's heap (4 KB each at most), and bench/fuzz.py's proxy grew by it. Our own LRU
    already keeps the vectors by text, so the tokenizer's cache is off."""
    import math

    import pytest
    from memory_probe import heap_in_use_mb

    from ctxwarden.proxy.embeddings import WordLlamaEmbedder

    if math.isnan(heap_in_use_mb()):
        pytest.skip("glibc's mallinfo2 is needed to read the native heap")
    embedder = WordLlamaEmbedder()
    embedder._embed_uncached(["warm up"])  # past our own cache: what the tokenizer keeps is what is measured
    before = heap_in_use_mb()
    for i in range(375):
        embedder._embed_uncached([f"invoice {i * 8 + j} for pallet {i * 7919 + j} was confirmed by the carrier" for j in range(8)])
    grew = heap_in_use_mb() - before
    assert grew < 2, f"the native heap grew {grew:.1f} MB over 3,000 distinct texts"


def _huge_page_advised_mb(pid: int) -> float:
    """MB of the process's anonymous mappings that were advised huge pages (VmFlags `hg`)."""
    advised, size, anonymous = 0.0, 0, False
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        head = line.split()
        if "-" in head[0] and ":" not in head[0]:
            start, end = (int(x, 16) for x in head[0].split("-"))
            size, anonymous = end - start, len(head) < 6 or head[5] == "[heap]"
        elif head[0] == "VmFlags:" and anonymous and "hg" in head[1:]:
            advised += size / 2**20
    return advised


def test_the_server_never_advises_huge_pages_for_its_heap(fake, tmp_path, monkeypatch):
    """NumPy advised huge pages for every array of 4 MiB or more (the embedder's 31 MB table, big
    batches); from glibc's heap, that advice outlived the array and khugepaged made freed heap
    resident again in 2 MiB pieces (26 MB by the end of bench/fuzz.py's 10,000 bodies). The real
    `ctxwarden serve`, after requests that load the embedder, holds no mapping so advised."""
    import pytest

    from ctxwarden.proxy.processes import start_replica

    if not Path("/sys/kernel/mm/transparent_hugepage/enabled").exists():
        pytest.skip("no transparent huge pages in this kernel: nothing can be advised")
    config = {**fuzz_bodies.CONFIG, "upstream": {"base_url": f"{fake.url}/v1", "api_key_env": None, "retries": 0},
              "storage": {"path": str(tmp_path / "store")}}
    monkeypatch.delenv("NUMPY_MADVISE_HUGEPAGE", raising=False)  # NumPy's own default, as users run it
    proxy = start_replica(tmp_path, config)
    try:
        messages = [{"role": "user", "content": "Our budget is $4,000 and we fly to Lisbon on 3 May."},
                    {"role": "assistant", "content": "Noted."},
                    {"role": "user", "content": "Actually the budget is $6,000. Which hotels fit?"}]
        r = httpx.post(f"{proxy.url}/v1/chat/completions", json={"model": "gpt-4o", "messages": messages}, timeout=60)
        assert r.status_code == 200
        assert fake.received, "the request did not reach the upstream"
        assert proxy.rss_mb() > 0
        assert _huge_page_advised_mb(proxy.proc.pid) == 0
    finally:
        proxy.stop()


def test_embeddings_come_back_as_one_float32_array_and_the_cache_keeps_rows_of_its_own():
    """Thousands of tool segments embedded at once never pass through Python floats (as lists they
    peaked at ~3x the memory and took ~2.7x the time), and a cached row is not a view that keeps its
    whole batch alive."""
    import numpy as np

    from ctxwarden.policies.base import embed_array
    from ctxwarden.proxy.embeddings import CachedEmbedder

    class Fake(CachedEmbedder):
        calls: list[int] = []

        def _embed_uncached(self, texts: list[str]) -> np.ndarray:
            self.calls.append(len(texts))
            return np.array([[float(len(t)), 1.0, 0.0] for t in texts], dtype=np.float64)

    embedder = Fake("fake", 3)
    texts = ["a", "bb", "a", "ccc"]
    vectors = embed_array(embedder, texts)
    assert vectors.dtype == np.float32 and vectors.shape == (4, 3)
    assert vectors[:, 0].tolist() == [1.0, 2.0, 1.0, 3.0] and embedder.calls == [3]  # "a" embedded once
    assert all(v.base is None and v.shape == (3,) for _, v in embedder._cache.items())
    again = embedder.embed_array(["ccc", "dddd"])  # one hit, one new text
    assert again[:, 0].tolist() == [3.0, 4.0] and embedder.calls == [3, 1]
    assert embedder.embed(["bb"]) == [[2.0, 1.0, 0.0]]  # the list form is still there for callers that want it

    class Remote(Fake):  # a remote model's width is known only from its first answer
        def _embed_uncached(self, texts: list[str]) -> np.ndarray:
            return np.ones((len(texts), 5))

    assert Remote("remote", 3).embed_array(["x", "y"]).shape == (2, 5)

    class ListsOnly:  # an embedder with `embed` alone (the policies' protocol) still works
        name, dim = "lists", 2

        def embed(self, texts):
            return [[1.0, 0.0] for _ in texts]

    assert embed_array(ListsOnly(), ["x"]).tolist() == [[1.0, 0.0]]


def test_an_lru_remeasure_of_an_absent_or_unbounded_entry_is_a_no_op():
    plain: LRU[str, list] = LRU(10)
    plain.put("a", [1])
    plain.remeasure("a")
    bounded: LRU[str, list] = LRU(10, max_bytes=100, sizeof=lambda k, v: 10 * len(v))
    bounded.remeasure("missing")
    bounded.put("a", [1, 2])
    bounded.get("a").extend(range(5))
    bounded.remeasure("a")
    assert bounded.bytes == 70


# ---------------------------------------------------------------------------- the scratchpad's writes


def test_archived_texts_go_to_chroma_in_few_upserts():
    from ctxwarden.policies.history import archive_rows, scratchpad

    upserts: list[int] = []
    collection = SimpleNamespace(upsert=lambda ids, **_: upserts.append(len(ids)), count=lambda: 0,
                                 delete=lambda **_: None)
    services = SimpleNamespace(store=SimpleNamespace(collection=lambda *_: collection),
                               metrics=SimpleNamespace(add=lambda *a, **k: None, record=lambda *a, **k: None))
    pad = scratchpad.Scratchpad(services)  # type: ignore[arg-type]

    async def archive() -> None:
        for i in range(700):  # a long history replayed: one span archived per block, ~1 ms apart
            pad.put("t", f"hs_{i:020d}", f"span {i} " * 50)
            if i % 50 == 0:
                await asyncio.sleep(0)
        await pad.flush()

    asyncio.run(archive())
    assert sum(upserts) == 700 and len(upserts) <= 4  # was 700 upserts of one (~35 ms each, GIL held)
    assert max(upserts) <= archive_rows.BATCH_ITEMS


# ---------------------------------------------------------------------------- through the server


def _post(proxy, body: dict, path: str = "/v1/chat/completions") -> tuple[httpx.Response, float]:
    started = time.perf_counter()
    r = httpx.post(f"{proxy.url}{path}", content=json.dumps(body), timeout=60,
                   headers={"content-type": "application/json", "anthropic-version": "2023-06-01"})
    return r, time.perf_counter() - started


def test_big_fields_answer_within_seconds(start_proxy):
    proxy = start_proxy(fuzz_bodies.CONFIG)
    base = {"model": "gpt-4o", "messages": [{"role": "user", "content": "What is the status?"}]}
    _post(proxy, base)  # the first request loads the tokenizer and the embedder
    big = fuzz_bodies.big_text("words", BIG, 1)
    for site in ("tool_description", "tool_parameters", "arguments", "arguments_json", "tool_result", "system"):
        r, took = _post(proxy, fuzz_bodies.put_big(base, site, big))
        assert r.status_code < 500 and took < 5, (site, r.status_code, round(took, 1), r.text[:200])


def test_a_history_of_thousands_of_messages_answers_within_seconds(start_proxy):
    proxy = start_proxy(fuzz_bodies.CONFIG)
    _post(proxy, {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]})
    body = fuzz_bodies.put_big({"model": "gpt-4o", "messages": [{"role": "user", "content": "and now?"}]}, "many_messages",
                               fuzz_bodies.big_text("words", BIG, 2))  # 15,000 messages
    r, took = _post(proxy, body)
    assert r.status_code < 500 and took < 8, (r.status_code, round(took, 1), r.text[:200])


def test_the_history_policy_stops_at_its_budget_and_forwards_the_request_unchanged(fake, start_proxy):
    proxy = start_proxy({**fuzz_bodies.CONFIG, "policies": {"history": {"budget_ms": 1}}})
    messages = [{"role": ("user", "assistant")[i % 2], "content": f"message {i} about Paris costs ${i}"} for i in range(3000)]
    r, _ = _post(proxy, {"model": "gpt-4o", "messages": messages})
    assert r.status_code == 200 and "history.skipped_budget" in r.headers["x-ctxwarden-actions"]
    assert len(fake.received[-1].body["messages"]) == 3000


def test_bodies_the_policies_cannot_read_are_refused_not_failed(start_proxy):
    proxy = start_proxy()
    anthropic = {"model": "claude", "max_tokens": 10, "messages": [
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": {"id": "a"}, "content": "ok"}]}]}
    empty_block = {"model": "claude", "max_tokens": 10, "messages": [{"role": "user", "content": [{}]}]}
    responses = {"model": "gpt-4o", "input": [{"type": "function_call", "call_id": "c", "name": ["f"], "arguments": "{}"}]}
    not_content = {"model": "gpt-4o", "input": [{"role": "user", "content": True}]}  # no session header: the opening is hashed
    not_output = {"model": "gpt-4o", "input": [{"type": "function_call_output", "call_id": "c", "output": 7}]}
    for body, path in ((anthropic, "/v1/messages"), (empty_block, "/v1/messages"), (responses, "/v1/responses"),
                       (not_content, "/v1/responses"), (not_output, "/v1/responses"),
                       ({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "temperature": 1e999},
                        "/v1/chat/completions")):
        raw = json.dumps(body).replace("Infinity", "1e999")
        r = httpx.post(f"{proxy.url}{path}", content=raw, timeout=30,
                       headers={"content-type": "application/json", "anthropic-version": "2023-06-01"})
        assert r.status_code == 400, (path, r.status_code, r.text[:200])


def _plain_size(value: object, seen: set[int]) -> int:
    """Bytes of plain data reachable from `value` (containers, strings, arrays, our dataclasses), each
    object once: what a cache entry holds, without the services an object may point to."""
    if id(value) in seen or isinstance(value, (type, bool, int, float, type(None))):
        return 0
    seen.add(id(value))
    if hasattr(value, "nbytes") and not hasattr(value, "__dict__"):  # a numpy array
        return 100 + int(value.nbytes)  # type: ignore[attr-defined]
    size = sys.getsizeof(value)
    if isinstance(value, dict):
        return size + sum(_plain_size(k, seen) + _plain_size(v, seen) for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        return size + sum(_plain_size(v, seen) for v in value)
    if hasattr(value, "__dataclass_fields__"):
        return size + sum(_plain_size(getattr(value, f, None), seen) for f in value.__dataclass_fields__)  # type: ignore[attr-defined]
    return size


def test_varied_requests_leave_every_cache_within_bytes(fake, start_proxy):
    """Fault 5 through the server: 90 requests on the three APIs, each a new session with fresh text,
    tools with long descriptions and tool results, and then every cache the server holds that grew past
    1 MB is bounded by bytes and holds no more than twice its bound (its sizes are honest)."""
    import gc

    proxy = start_proxy({**fuzz_bodies.CONFIG, "upstream": {"anthropic": {"base_url": f"{fake.url}/v1", "api_key_env": None}}})
    with httpx.Client(base_url=proxy.url, timeout=60) as client:
        for i in range(90):
            api = fuzz_bodies.APIS[i % 3]
            tools = [fuzz_bodies._tool(f"tool{i}_{k}", fuzz_bodies.big_text("words", 20_000, 10 * i + k)) for k in range(3)]
            messages = [{"role": "user", "content": fuzz_bodies.big_text("words", 3_000, i)},
                        *fuzz_bodies._call_round('{"q": "status"}', f"c{i}", fuzz_bodies.big_text("lines", 8_000, i)),
                        {"role": "user", "content": f"I prefer window seats and my budget is ${100 + i}. What now?"}]
            body = fuzz_bodies.in_api(api, {"model": "gpt-4o", "messages": messages, "tools": tools})
            r = client.post(fuzz_bodies.PATHS[api], content=json.dumps(body), headers={
                "content-type": "application/json", "x-ctxwarden-session": f"s{i}", "x-ctxwarden-user": f"u{i % 7}",
                **{k.decode(): v.decode() for k, v in fuzz_bodies.API_HEADERS[api].items()}})
            assert r.status_code == 200, (api, r.status_code, r.text[:300])
    gc.collect()
    caches = [o for o in gc.get_objects() if isinstance(o, LRU) and len(o)]
    held = [(_plain_size(c.items(), set()), c) for c in caches]
    big = [(size, c) for size, c in held if size > 2**20]
    assert big, "no cache grew: the requests did not exercise them"
    for size, cache in big:
        assert cache.max_bytes is not None, f"a cache of {len(cache)} entries holds {size / 2**20:.1f} MB, bounded by count only"
        assert size <= 2 * cache.bytes + 2**20, \
            f"a cache sized {cache.bytes / 2**20:.1f} MB holds {size / 2**20:.1f} MB ({len(cache)} entries)"


def test_counting_a_megabyte_of_text_makes_no_python_object_per_token():
    """A 1 MB text's tokens were a list of ~460,000 Python ints (14 MB of CPython's small-object
    arenas for a moment, the churn that leaves arenas pinned): counted now from one numpy buffer,
    with the same count."""
    import tracemalloc

    from ctxwarden.policies.text.tokens import TiktokenCounter

    counter = TiktokenCounter()
    _, encoding = counter._encoding("gpt-4o")
    text = fuzz_bodies.big_text("json", 1_000_000, 1)
    expected = len(encoding.encode(text, disallowed_special=()))
    tracemalloc.start()
    try:
        counted = counter.count_text(text, "gpt-4o")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert counted == expected > 400_000
    assert peak < 2 * 2**20, f"counting held {peak / 2**20:.1f} MB of Python objects at its peak"
