"""What embedded Chroma keeps in memory for each collection it has touched (issue 43's RSS bound).

    .venv/bin/python bench/chroma_memory.py [--collections 400] [--every 50]

Opens a fresh store the way the proxy does (`storage.max_open_indexes` 16, collections made as the
proxy makes them: vectors in row metadata, a one-dimensional placeholder in Chroma), writes one row
into each of `--collections` new collections, and prints the native heap in use (glibc `mallinfo2`)
and RSS as it goes; then reopens the store in a new client and only counts the rows of each
collection, to show that reading a collection costs the same as writing it.

Measured with chromadb 1.5.9 (2026-11-27): ~1.4 MB for each collection touched (one allocation on a
Chroma worker thread, whatever the vector dimension, hnsw:M or `max_open_indexes`), up to ~165 MB
in all from ~150-300 collections on, where it levels off. The proxy keeps a few collections per
tenant (archive, tool catalog, memory, knowledge base), so a store shared by ~50 tenants reaches that
plateau; with `storage.chroma_url` this memory is the Chroma server's, not the proxy's.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ctxwarden.proxy.config import StorageConfig  # noqa: E402
from ctxwarden.proxy.storage import ChromaStore  # noqa: E402
from memory_probe import heap_in_use_mb as heap_mb, rss_mb  # noqa: E402


def count_rows(path: str, collections: int) -> int:
    reader = ChromaStore(StorageConfig(path=path))
    reader.client  # noqa: B018 - opened before the baseline: the client's own cost is not counted
    before = heap_mb()
    for i in range(1, collections + 1):
        reader.collection(f"memtest{i:05d}").count()
    grew = heap_mb() - before
    print(f"a new process counting the rows of {collections} collections: heap {grew:+.0f} MB ({grew / collections:.2f} MB per collection read)")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--collections", type=int, default=400)
    parser.add_argument("--every", type=int, default=50)
    parser.add_argument("--count", metavar="PATH", help=argparse.SUPPRESS)  # the reading half, in its own process
    args = parser.parse_args()
    if args.count:
        return count_rows(args.count, args.collections)
    path = tempfile.mkdtemp(prefix="ctxw-chroma-memory-")
    store = ChromaStore(StorageConfig(path=path))
    start = heap_mb()
    print(f"store at {path}; native heap in use {start:.0f} MB, RSS {rss_mb():.0f} MB before any collection")
    print("collections written  heap in use (growth, per collection)  RSS")
    for i in range(1, args.collections + 1):
        col = store.collection(f"memtest{i:05d}")
        col.upsert(ids=["row"], documents=["one short row"], embeddings=[[0.1] * 384], metadatas=[{"n": i}])
        if i % args.every == 0 or i == args.collections:
            now = heap_mb()
            print(f"{i:19d}  {now:6.0f} MB ({now - start:+5.0f} MB, {(now - start) / i:.2f} MB)  {rss_mb():5.0f} MB", flush=True)
    # Another process: a second client on the same path in this one shares the first one's engine.
    subprocess.run([sys.executable, __file__, "--count", path, "--collections", str(min(args.collections, 40))], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
