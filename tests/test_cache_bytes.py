"""The shared LRU bounded by bytes too: big values cannot fill memory while under the entry count."""

from __future__ import annotations

import pytest

from ctxwarden.policies.cache import LRU
from ctxwarden.policies.history.blocks import BlockCache, SummaryBlock


def text_size(key: str, value: str) -> int:
    return len(value)


def test_the_byte_bound_evicts_least_recently_used_first():
    cache: LRU[str, str] = LRU(1000, max_bytes=100, sizeof=text_size)
    for i in range(10):
        cache.put(f"k{i}", "x" * 30)
    assert len(cache) == 3 and cache.bytes == 90  # 10 entries fit the count, not the bytes
    assert cache.get("k9") and cache.get("k7") and cache.get("k6") is None
    cache.put("k8", "y" * 10)  # replaced: its old size is forgotten
    assert cache.bytes == 70
    assert cache.pop("k8") == "y" * 10 and cache.bytes == 60
    cache.clear()
    assert cache.bytes == 0 and len(cache) == 0


def test_an_entry_bigger_than_the_bound_is_not_kept_and_evicts_nothing():
    evicted: list[str] = []
    cache: LRU[str, str] = LRU(10, max_bytes=100, sizeof=text_size, on_evict=lambda k, v: evicted.append(k))
    cache.put("small", "x" * 50)
    cache.put("huge", "x" * 500)
    assert cache.get("huge") is None and cache.get("small") == "x" * 50 and evicted == []
    cache.put("small", "x" * 500)  # the old value goes with the too-big new one
    assert cache.get("small") is None and cache.bytes == 0


def test_keep_one_keeps_the_newest_entry_whatever_its_size_and_only_it():
    cache: LRU[str, str] = LRU(10, max_bytes=100, sizeof=text_size, keep_one=True, budgeted=False)
    cache.put("small", "x" * 50)
    cache.put("huge", "x" * 500)
    assert cache.get("huge") == "x" * 500 and cache.get("small") is None and cache.bytes == 500
    cache.put("next", "x" * 40)  # the big one goes as soon as anything else is used
    assert cache.get("huge") is None and cache.get("next") and cache.bytes == 40
    cache.put("next", "x" * 400)  # grown past the bound in place: kept, alone
    assert cache.get("next") == "x" * 400 and len(cache) == 1


def test_expiry_releases_bytes():
    now = [0.0]
    cache: LRU[str, str] = LRU(10, ttl_s=5, clock=lambda: now[0], max_bytes=100, sizeof=text_size)
    cache.put("a", "x" * 60)
    now[0] = 10
    cache.put("b", "x" * 60)  # "a" expired: no room was needed from it
    assert cache.get("a") is None and cache.bytes == 60


def test_a_byte_bound_needs_a_size_function():
    with pytest.raises(ValueError):
        LRU(10, max_bytes=100)


def test_summary_blocks_are_bounded_by_their_text():
    cache = BlockCache(max_blocks=1000, max_bytes=10_000)
    for i in range(50):
        cache.put(SummaryBlock(f"k{i}", 4, "summary " * 250, "extractive", 100))  # ~2 KB each
    assert len(cache) <= 5 and cache.get("k49") is not None and cache.get("k0") is None


def test_summary_blocks_are_counted_as_cpython_stores_their_text():
    """A summary of text outside the BMP takes 4 bytes a character: counted in characters, blocks of
    bench/fuzz.py's text held 2.2x the cache's bound."""
    import sys

    cache = BlockCache(max_blocks=1000, max_bytes=100_000)
    text = "\U0001f600 summary line " * 400  # 6,000 characters, 24 KB
    for i in range(20):
        cache.put(SummaryBlock(f"k{i}", 4, text, "extractive", 100))
    held = sum(sys.getsizeof(b.text) for _, b in cache._by_key.items())
    assert cache._by_key.bytes <= 100_000 and held <= 100_000
    assert len(cache) == 4 and cache.get("k19") is not None  # 16 when counted in characters


def test_archive_search_caches_are_bounded_by_bytes():
    from ctxwarden.policies.history.archive_search import ArchiveSearch

    search = ArchiveSearch(max_texts=1000, max_indexes=1000, max_bytes=2_000_000)
    texts = {f"r{i}": " ".join(f"order{i}x{k} pallet{k}" for k in range(5000)) for i in range(10)}  # ~150 KB each
    for ref, text in texts.items():
        assert search.search({ref: text}, f"order{ref[1:]}x7")  # a chunking and an index each
    assert search._chunked.bytes <= 2_000_000 and len(search._chunked) < 10
    assert search._indexes.bytes <= 2_000_000 and len(search._indexes) < 10
    assert search.search({"r9": texts["r9"]}, "order9x7")  # still answers from what is kept


def test_prefix_watch_is_bounded_by_bytes():
    from types import SimpleNamespace

    from ctxwarden.policies.base import RequestNotes
    from ctxwarden.proxy.prefix_watch import PrefixWatch

    watch = PrefixWatch(max_sessions=10_000, max_bytes=1_000_000)
    messages = [{"role": "user", "content": f"message {k}"} for k in range(1000)]  # ~110 KB of hashes
    for i in range(20):
        assert watch.observe(SimpleNamespace(session_key=("t", f"s{i}"), notes=RequestNotes()), {"messages": messages}) == "new"
    assert watch._last.bytes <= 1_000_000 and len(watch._last) < 20
    assert watch.observe(SimpleNamespace(session_key=("t", "s19"), notes=RequestNotes()), {"messages": messages}) == "extends"


def test_long_arguments_are_computed_each_time_and_never_kept():
    from ctxwarden.policies.cache import cache_short
    from ctxwarden.policies.loops.detect import call_key

    calls = []

    @cache_short(maxsize=100, max_chars=10)
    def upper(text: str, suffix: str = "") -> str:
        calls.append(text)
        return text.upper() + suffix

    assert upper("abc") == upper("abc") == "ABC" and calls == ["abc"]  # short: cached
    blob = "x" * 50
    assert upper(blob) == upper(blob) == blob.upper() and calls.count(blob) == 2  # long: computed twice
    assert upper("abc", suffix="y" * 20) == "ABC" + "y" * 20 and upper.cache_info().currsize == 1
    call_key.cache_clear()
    big = '{"path": "a.py", "content": "' + "print(1)\\n" * 2000 + '"}'  # a file written whole
    assert call_key("write_file", big) == call_key("write_file", big)  # same identity, not cached
    assert call_key.cache_info().currsize == 0


def test_a_tool_sets_term_postings_are_bounded_by_bytes():
    from ctxwarden.policies.tools.ranking import LexicalDoc, LexicalIndex

    docs = [LexicalDoc({f"term{j}": 1 for j in range(i, i + 100)}, 100) for i in range(2000)]
    index = LexicalIndex(docs)
    for j in range(0, 2050, 2):
        index.scores([f"term{j}"])  # each posting: ~100 tools × 16 bytes
    assert index._postings.bytes <= LexicalIndex.MAX_POSTING_BYTES
    assert len(index._postings) < 1025  # some were evicted to stay under it
    fresh = LexicalIndex(docs)
    assert (fresh.scores(["term10"]) == index.scores(["term10"])).all()  # an evicted term scores the same


def test_the_token_counts_are_shares_of_the_cache_budget():
    """The token counter's two caches were bounded by 50,000 entries alone, outside `server.cache_mb`."""
    from ctxwarden.policies.cache import NOMINAL_CACHE_BYTES, set_cache_budget
    from ctxwarden.policies.text.tokens import CACHE_BYTES, ENTRY_BYTES, TiktokenCounter

    set_cache_budget(NOMINAL_CACHE_BYTES // 1000)  # each cache: ~8.4 KB, 42 counts
    try:
        counter = TiktokenCounter()
        texts = [f"line {i}: " + "pallet shipped " * 40 for i in range(200)]  # over LONG_TEXT: cached by hash
        counts = [counter.count_text(t, "gpt-4o") for t in texts]
        for i in range(200):
            counter.count_message({"role": "user", "content": f"message {i}"}, "gpt-4o")
        bound = CACHE_BYTES // 1000 // ENTRY_BYTES + 1
        assert len(counter._texts) <= bound and len(counter._cache) <= bound
        assert counts == [counter.count_text(t, "gpt-4o") for t in texts]  # counted again, the same
    finally:
        set_cache_budget(None)


def test_a_replay_counts_what_it_holds():
    """The history planner's per-session replay keeps 8 columns of k values (`read`): counted at 60
    bytes a unit, the replays of bench/fuzz.py's sessions held ~6x their bound."""
    import random
    import sys

    from ctxwarden.policies.history.events import Replay

    def deep(value: object, seen: set[int]) -> int:
        if id(value) in seen:
            return 0
        seen.add(id(value))
        return sys.getsizeof(value) + (sum(deep(v, seen) for v in value) if isinstance(value, tuple) else 0)

    rng = random.Random(0)
    for k in (10, 100, 1000):
        columns = [tuple(range(0, 3 * k, 3)), tuple(rng.randint(1, 5) for _ in range(k)),
                   tuple(rng.randint(300, 4000) for _ in range(k)), tuple(rng.random() < 0.3 for _ in range(k)),
                   tuple(rng.random() < 0.5 for _ in range(k)), tuple(1.7e9 + rng.random() for _ in range(k)),
                   tuple(rng.randint(0, 900) for _ in range(k))]
        results = tuple(tuple(rng.randint(300, 4000) for _ in range(rng.randint(0, 2))) for _ in range(k))
        replay = Replay(k, (None, None, *columns, results), 0, (), (), -1)
        held = deep(replay.read, set())
        assert 0.8 * held <= replay.bytes() <= 2 * held + 1000, (k, held, replay.bytes())
