"""Embedded Chroma keeps a bounded number of vector indexes in memory (storage.max_open_indexes)."""

from __future__ import annotations

import numpy as np

from ctxwarden.proxy.config import StorageConfig
from ctxwarden.proxy.storage import ChromaStore


def test_the_embedded_store_holds_at_most_max_open_indexes_and_reads_evicted_ones_back(tmp_path):
    store = ChromaStore(StorageConfig(path=str(tmp_path / "s"), max_open_indexes=3))
    assert store.client._server.hnsw_cache_size == 3  # Chroma's own default here: open-files limit / 5
    rng = np.random.default_rng(0)
    vectors = {}
    for i in range(8):  # more collections than the cap: the first ones are evicted from memory
        vectors[i] = rng.random((20, 16))
        store.collection("notes", tenant=f"tenant-{i}").add(ids=[f"n{j}" for j in range(20)], embeddings=vectors[i].tolist(),
                                                           documents=[f"t{i} d{j}" for j in range(20)])
    for i in range(8):  # every one answers from disk or memory alike
        got = store.collection("notes", tenant=f"tenant-{i}").query(query_embeddings=[vectors[i][7].tolist()], n_results=1)
        assert got["documents"][0] == [f"t{i} d7"]
