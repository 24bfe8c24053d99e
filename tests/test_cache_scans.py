"""A batch bigger than its cache does not go into it: the embedder's text cache and the tools'
facts cache keep what other requests reuse when one request brings a thousand new texts or tools.

Put one by one, such a batch evicted every other entry and then its own first ones (an LRU filled
by a scan bigger than itself keeps only the scan's tail): bench/fuzz.py's 1 MB tool lists."""

from __future__ import annotations

import numpy as np

from ctxwarden.policies.tools import facts as facts_module
from ctxwarden.policies.tools.facts import FactsCache
from ctxwarden.proxy.embeddings import CachedEmbedder


class RecordingEmbedder(CachedEmbedder):
    def __init__(self, max_bytes: int) -> None:
        super().__init__("recording", 8, cache_size=100_000, max_bytes=max_bytes)
        self.computed: list[str] = []

    def _embed_uncached(self, texts: list[str]) -> np.ndarray:
        self.computed += texts
        rng = np.random.default_rng(len(self.computed))
        return rng.random((len(texts), 8), dtype=np.float32)


def test_a_batch_of_new_texts_bigger_than_the_embedders_cache_leaves_the_cache_as_it_was():
    embedder = RecordingEmbedder(max_bytes=200_000)  # ~600 vectors of 8 floats
    known = [f"known text {i}" for i in range(20)]
    first = embedder.embed_array(known)
    flood = [f"one request's new segment {i}" for i in range(5_000)]
    assert embedder.embed_array(flood).shape == (5_000, 8)
    embedder.computed.clear()
    again = embedder.embed_array(known)
    assert embedder.computed == []  # still cached: the flood went past the cache
    assert np.array_equal(first, again)
    embedder.embed_array(flood[:10])
    assert embedder.computed == flood[:10]  # not kept: computed again (the tool catalog keeps tools' vectors)
    small = [f"a small batch {i}" for i in range(10)]
    embedder.embed_array(small)
    embedder.computed.clear()
    embedder.embed_array(small)
    assert embedder.computed == []  # an ordinary batch is kept


def tool(name: str, words: int = 8) -> dict:
    description = " ".join(f"{name}word{j}" for j in range(words))
    return {"type": "function", "function": {"name": name, "description": description,
                                             "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}


def test_a_tool_set_whose_facts_exceed_the_share_does_not_evict_the_others(monkeypatch):
    read: list[str] = []
    describe = facts_module.describe_tool
    monkeypatch.setattr(facts_module, "describe_tool", lambda t: read.append(t["function"]["name"]) or describe(t))
    cache = FactsCache(max_bytes=400_000)
    everyday = [tool(f"everyday_{i}") for i in range(30)]
    cache.facts(everyday)
    huge = [tool(f"fuzzed_{i}", words=300) for i in range(600)]  # ~10 KB of facts each: 15x the share
    assert len(cache.facts(huge)) == 600
    read.clear()
    cache.facts(everyday)
    assert read == []  # the everyday set's facts are still there
    cache.facts(huge[:5])
    assert len(read) == 5  # the huge set's were never kept
