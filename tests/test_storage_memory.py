"""Embedded Chroma keeps a bounded number of vector indexes in memory (storage.max_open_indexes)."""

from __future__ import annotations

import numpy as np

from ctxwarden.proxy.config import StorageConfig
from ctxwarden.proxy.storage import ChromaStore, collection_name


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
        got = store.collection("notes", tenant=f"tenant-{i}").get(ids=["n7"], include=["embeddings", "documents"])
        assert got["documents"] == [f"t{i} d7"]
        np.testing.assert_allclose(got["embeddings"][0], vectors[i][7], rtol=1e-6)


def _interleaved_writes(store: ChromaStore, tenants: int, steps: int, dim: int = 16) -> dict[tuple[int, str], np.ndarray]:
    """One row in each tenant's collection, then writes and reads of random tenants: with more
    collections than the index cache holds, Chroma evicts indexes it has not saved to files yet."""
    rng = np.random.default_rng(0)
    written: dict[tuple[int, str], np.ndarray] = {}
    for step in range(-tenants, steps):
        t = step + tenants if step < 0 else int(rng.integers(tenants))
        col = store.collection("notes", tenant=f"tenant-{t}")
        if step >= 0 and rng.random() < 0.5:
            col.get(include=["embeddings"])
            continue
        row, vector = (f"r{step}", rng.random(dim).astype(np.float32))
        col.upsert(ids=[row], embeddings=[vector.tolist()], documents=[f"d{step}"], metadatas=[{"step": step}] if step % 2 else None)
        written[(t, row)] = vector
    return written


def test_vectors_stay_readable_in_every_collection_whatever_the_index_cache_evicted(tmp_path):
    # Without the vectors in the rows' metadata, this scenario leaves 3-4 of the 30 collections
    # answering "Error creating hnsw segment reader: Nothing found on disk" to every embeddings read.
    store = ChromaStore(StorageConfig(path=str(tmp_path / "s"), max_open_indexes=2))
    written = _interleaved_writes(store, tenants=30, steps=60)
    for t in range(30):
        got = store.collection("notes", tenant=f"tenant-{t}").get(include=["embeddings", "metadatas"])
        assert len(got["ids"]) == sum(1 for (tt, _) in written if tt == t)
        for row, vector, meta in zip(got["ids"], got["embeddings"], got["metadatas"]):
            np.testing.assert_allclose(np.asarray(vector, dtype=np.float32), written[(t, row)], rtol=1e-6)
            step = int(row[1:])
            assert meta == ({"step": step} if step % 2 else None)  # the stored vector is never shown to callers
    assert store.errors == 0


def test_an_embeddings_only_read_and_rows_written_before_vectors_were_kept_read_as_before(tmp_path):
    store = ChromaStore(StorageConfig(path=str(tmp_path / "s")))
    # A collection made before vectors lived only in metadata: Chroma holds them too (its dimension is fixed)
    store.client.get_or_create_collection(collection_name("notes", "acme"), embedding_function=None,
                                          metadata={"hnsw:space": "cosine"})
    col = store.own_collection("notes", tenant="acme")  # a collection of its own, as the knowledge base's
    col.upsert(ids=["new"], embeddings=[[0.25, 0.5]], documents=["kept"])
    got = col.get(ids=["new"], include=["embeddings"])
    assert got["metadatas"] is None and got["embeddings"].tolist() == [[0.25, 0.5]]
    col._collection.upsert(ids=["old"], embeddings=[[1.0, 2.0]], metadatas=[{"a": 1}])  # as a store written before
    got = col.get(include=["embeddings", "metadatas"])
    assert dict(zip(got["ids"], got["embeddings"].tolist())) == {"new": [0.25, 0.5], "old": [1.0, 2.0]}
    assert dict(zip(got["ids"], got["metadatas"])) == {"new": None, "old": {"a": 1}}
    assert col.get(include=[], ids=["new"])["ids"] == ["new"]
    empty = store.own_collection("notes", tenant="nobody").get(include=["embeddings"])
    assert empty["ids"] == [] and len(empty["embeddings"]) == 0


def test_a_new_collection_gives_chroma_a_placeholder_and_keeps_each_vector_in_the_row(tmp_path):
    # Chroma keeps a collection's vector index in memory: 384 floats a row made a big collection's
    # index weigh megabytes, and the proxy never searches Chroma by vector.
    store = ChromaStore(StorageConfig(path=str(tmp_path / "s")))
    col = store.collection("notes", tenant="acme")
    vectors = np.random.default_rng(1).random((5, 384)).astype(np.float32)
    col.upsert(ids=[f"r{i}" for i in range(5)], embeddings=vectors.tolist(), documents=[f"d{i}" for i in range(5)],
               metadatas=[{"i": i} for i in range(5)])
    col.update(ids=["r2"], metadatas=[{"i": 22}])  # a metadata-only update keeps the row's vector
    raw = col._collection._collection.get(include=["embeddings"])  # Chroma's own, under the pool's tenant view
    assert np.asarray(raw["embeddings"]).shape == (5, 1)
    got = col.get(include=["embeddings", "metadatas"])
    order = [got["ids"].index(f"r{i}") for i in range(5)]
    np.testing.assert_allclose(np.asarray(got["embeddings"])[order], vectors, rtol=1e-6)
    assert [got["metadatas"][k] for k in order] == [{"i": 0}, {"i": 1}, {"i": 22}, {"i": 3}, {"i": 4}]
    reopened = ChromaStore(StorageConfig(path=str(tmp_path / "s"))).collection("notes", tenant="acme")
    assert np.asarray(reopened.get(ids=["r4"], include=["embeddings"])["embeddings"]).shape == (1, 384)
