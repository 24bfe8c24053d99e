"""Each row's vector is also kept in its metadata, so reading vectors never needs Chroma's vector index.

The proxy never searches Chroma by vector (it ranks in process); it stores rows and reads them back
with their embeddings. Embedded Chroma (1.x) serves those embeddings from the collection's vector
index (hnsw), which it keeps in memory and saves to files only every `sync_threshold` rows. Measured
with chromadb 1.5.9: with more collections than its index cache holds (one tenant has several), a
collection whose index was evicted before being saved answers every read of embeddings with
"Error creating hnsw segment reader: Nothing found on disk", for good: 88 of 150 collections after
random use with a cache of 8 indexes, 34 reads of 1,000 with a cache of 256. Documents, metadata,
upserts and deletes were unaffected (0 rows of 236 lost). Another process on the same store cannot
read the vectors this one wrote either (policies/poisoning/kbstore.py).

Metadata lives in SQLite: transactional, shared by every process, never evicted. So a write with
embeddings also writes each vector (float32, base64: ~2 KB for 384 dimensions) into the row's
metadata under VECTOR_KEY, and a read that asks for embeddings takes them from there. Rows written
before this (no key) are read from Chroma's index as before. Callers never see the key. The bound
on Chroma's index cache (storage.max_open_indexes) therefore costs no data.

Collections made since (their metadata has MODE_KEY) give Chroma a one-dimensional PLACEHOLDER for
every row instead of the vector: the index Chroma must keep then holds ~150 bytes a row, not ~1.7 KB
(384 dimensions), and a cached index of a big collection no longer weighs megabytes. Older
collections keep full vectors in Chroma (their dimension is fixed), and so still serve old rows.
"""

from __future__ import annotations

import base64
from typing import Any, Callable, Sequence

import numpy as np

VECTOR_KEY = "ctxw_vector"
WRITES = ("add", "upsert", "update")
MODE_KEY, IN_METADATA = "ctxw_vectors", "metadata"  # a collection's metadata: its vectors live only in rows' metadata
PLACEHOLDER = [1.0]  # what Chroma is given as each row's vector in such a collection


def only_in_metadata(collection_metadata: dict[str, Any] | None) -> bool:
    return (collection_metadata or {}).get(MODE_KEY) == IN_METADATA


def encode(vector: Sequence[float] | np.ndarray) -> str:
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")


def decode(text: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text), dtype="<f4")


def with_vectors_in_metadata(kwargs: dict[str, Any], placeholder: bool = False) -> dict[str, Any]:
    """The write's arguments with each row's vector added to its metadata (a row without metadata
    gets one holding only the vector); with `placeholder`, Chroma is given PLACEHOLDER instead."""
    embeddings = kwargs.get("embeddings")
    if embeddings is None or len(embeddings) == 0:
        return kwargs
    metadatas = kwargs.get("metadatas")
    rows = list(metadatas) if metadatas is not None else [None] * len(embeddings)
    if len(rows) != len(embeddings):  # let Chroma report the mismatch in its own words
        return kwargs
    written = {**kwargs, "metadatas": [{**(m or {}), VECTOR_KEY: encode(v)} for m, v in zip(rows, embeddings)]}
    if placeholder:
        written["embeddings"] = [PLACEHOLDER] * len(rows)
    return written


def _strip(result: dict[str, Any]) -> dict[str, Any]:
    metas = result.get("metadatas")
    if metas:
        result["metadatas"] = [without_key(m, VECTOR_KEY) for m in metas]
    return result


def without_key(meta: dict[str, Any] | None, key: str) -> dict[str, Any] | None:
    """A row's metadata without one of the store's own keys (pooled.py's tenant tag too)."""
    if not meta or key not in meta:
        return meta
    rest = {k: v for k, v in meta.items() if k != key}
    return rest or None  # a row stored without metadata reads back as None, as before


def get_with_vectors(get: Callable[..., dict[str, Any]], *args: Any, **kwargs: Any) -> dict[str, Any]:
    """`collection.get`, embeddings taken from the rows' metadata when every row has them there;
    otherwise (rows written before) the plain call, as Chroma answers it."""
    include = list(kwargs.get("include") or ())
    if "embeddings" not in include:
        return _strip(get(*args, **kwargs))
    asked_metadatas = "metadatas" in include
    lean = [x for x in include if x != "embeddings"] + ([] if asked_metadatas else ["metadatas"])
    got = get(*args, **{**kwargs, "include": lean})
    metas = got.get("metadatas") or []
    if any(not m or VECTOR_KEY not in m for m in metas):
        return _strip(get(*args, **kwargs))
    # float64 rows, as Chroma answers; the float32 values as written (Chroma's own differ in the last bit)
    got["embeddings"] = np.asarray([decode(m[VECTOR_KEY]) for m in metas], dtype=np.float64) if metas \
        else np.asarray([], dtype=np.float64)
    if not asked_metadatas:
        got["metadatas"] = None
    if isinstance(got.get("included"), list):
        got["included"] = include
    return _strip(got)
