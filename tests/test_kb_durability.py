"""Knowledge-base durability and freshness against a real embedded Chroma store.

- kill -9 loop: a writer process keeps replacing documents (one of them big enough to take two
  Chroma batches) and is SIGKILLed at random moments; the next process opens the store and must
  find every acknowledged document, each in its last acknowledged or its in-flight version, whole.
- freshness: a replace made through one KnowledgeBase is seen by another over the same store,
  even when the passage count does not change.

Run as a script, this file is the writer: `python test_kb_durability.py STORE FIRST_VERSION`.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SMALL_DOCS = 4
KILLS = 10


class HashEmbedder:
    """Deterministic 8-dimensional vectors: no model to load in the writer processes."""

    name, dim = "hash8", 8

    def embed(self, texts):
        out = []
        for text in texts:
            raw = hashlib.sha256(text.encode()).digest()[:8]
            vec = [b - 127.5 for b in raw]
            norm = sum(v * v for v in vec) ** 0.5
            out.append([v / norm for v in vec])
        return out


def doc_text(doc_id: str, version: int) -> str:
    if doc_id == "big":  # 1000-1100 sentences: with the small documents, two Chroma batches per write
        return " ".join(f"Big record {version} line {k} holds {k * version}." for k in range(1000 + (version % 3) * 50))
    d = int(doc_id[1:])
    return " ".join(f"Doc {d} version {version} fact {k}." for k in range(2 + (version + d) % 5))


DOC_IDS = ["big"] + [f"d{i}" for i in range(SMALL_DOCS)]


def open_kb(store_path: str, refresh_s: float = 0.0):
    from ctxwarden.policies.poisoning.kb import KnowledgeBase
    from ctxwarden.proxy.config import StorageConfig
    from ctxwarden.proxy.storage import ChromaStore

    return KnowledgeBase(ChromaStore(StorageConfig(path=store_path)), HashEmbedder(), "acme", refresh_s)


def snapshot(kb) -> dict[str, dict]:
    """What a reader sees: per document, its listed text and its passages in the evidence index."""
    docs, _ = kb.documents(limit=1000)
    passages: dict[str, list[tuple[int, str]]] = {}
    for s in kb.index.sentences:
        passages.setdefault(s.doc_id, []).append((s.part, s.text))
    seen = {d.id: {"text": d.text, "passages": [t for _, t in sorted(passages.pop(d.id, []))]} for d in docs}
    for doc_id, parts in passages.items():  # passages of a document the listing does not show: a half one
        seen[doc_id] = {"text": None, "passages": [t for _, t in sorted(parts)]}
    return seen


def writer(store_path: str, first_version: int) -> None:
    from ctxwarden.policies.poisoning.kb import Document

    kb = open_kb(store_path)
    print("state " + json.dumps(snapshot(kb)), flush=True)
    version = first_version
    while True:
        kb.add([Document(doc_id, doc_text(doc_id, version), {"version": version}) for doc_id in DOC_IDS])
        print(f"ack {version}", flush=True)
        version += 1


def version_of(doc_id: str, seen: dict) -> int | None:
    """The version whose full text (and every passage) the reader saw, or None if it saw a mix."""
    from ctxwarden.policies.text.sentences import split_sentences

    text = seen["text"]
    if text is None:
        return None
    version = int(text.split()[2]) if doc_id == "big" else int(text.split()[3])
    if text != doc_text(doc_id, version) or seen["passages"] != split_sentences(text):
        return None
    return version


def test_kill_dash_nine_never_loses_or_halves_an_acknowledged_document(tmp_path):
    store = str(tmp_path / "store")
    rng = random.Random(1234)
    acked: int | None = None  # the newest version every document was acknowledged in
    unacked: set[int] = set()  # versions in flight when a writer was killed since then: may have landed
    next_version, total_acks = 1, 0
    started = time.monotonic()
    for kill in range(KILLS + 1):
        proc = subprocess.Popen([sys.executable, __file__, store, str(next_version)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=str(tmp_path))
        line = proc.stdout.readline()
        assert line.startswith("state "), proc.stderr.read()
        state = json.loads(line[len("state "):])
        check_state(state, acked, unacked, kill)
        if kill == KILLS:
            proc.kill()
            proc.wait()
            break
        first_ack: list[str] = []
        if kill % 2:  # every other writer is let finish one write first: a slow machine still tests kills
            first_ack.append(proc.stdout.readline())  # after an ack, not only before the first one
        time.sleep(rng.uniform(0.2, 2.5))  # a write takes ~0.7 s here: kills land in every phase
        os.kill(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        lines = first_ack + out.splitlines()
        acks = [int(line.split()[1]) for line in lines if line.startswith("ack ")]
        total_acks += len(acks)
        if acks:
            acked, unacked = acks[-1], set()
        in_flight = acks[-1] + 1 if acks else next_version
        unacked.add(in_flight)
        next_version = in_flight + 1  # versions are never reused: what a reader sees names its writer
    assert total_acks >= 4, "the writers never got far enough to test anything"
    assert time.monotonic() - started < 300  # a hang, not a slow machine


def check_state(state: dict, acked: int | None, unacked: set[int], kill: int) -> None:
    if acked is None and not unacked:
        assert state == {}
        return
    allowed = unacked | ({acked} if acked is not None else set())
    assert set(state) <= set(DOC_IDS), state.keys()
    for doc_id in DOC_IDS:
        seen = state.get(doc_id)
        if seen is None:
            assert acked is None, f"after kill {kill}: {doc_id} (acknowledged in version {acked}) is missing"
            continue
        version = version_of(doc_id, seen)
        assert version is not None, f"after kill {kill}: {doc_id} is half written: {str(seen)[:300]}"
        assert version in allowed, f"after kill {kill}: {doc_id} is in version {version}, expected one of {allowed}"


# ---------------------------------------------------------------------------- freshness (item 18)


def test_a_replace_through_one_instance_is_seen_by_another_even_at_the_same_size(tmp_path):
    from ctxwarden.policies.poisoning.kb import Document

    path = str(tmp_path / "store")
    writer_kb, reader_kb = open_kb(path), open_kb(path, refresh_s=0.2)
    writer_kb.add([Document("hq", "Acme's head office is in Mumbai.", {})])
    assert [s.text for s in reader_kb.index.sentences] == ["Acme's head office is in Mumbai."]
    version = reader_kb.version
    writer_kb.add([Document("hq", "Acme's head office is in Berlin.", {})])  # same id, same size
    assert [s.text for s in reader_kb.index.sentences] == ["Acme's head office is in Mumbai."]  # within refresh_s
    time.sleep(0.25)
    assert [s.text for s in reader_kb.index.sentences] == ["Acme's head office is in Berlin."]
    assert reader_kb.version > version  # cached verdicts keyed by the old version are void
    time.sleep(0.25)
    before = reader_kb.index
    time.sleep(0.25)
    assert reader_kb.index is before  # nothing changed: no reload


def test_a_replace_in_one_process_is_seen_by_a_server_process_reading_the_same_chroma(tmp_path):
    """Two processes over one shared Chroma (storage.chroma_url, the replica set-up)."""
    chroma = subprocess.run([sys.executable, "-c", "import shutil,sys; sys.exit(0 if shutil.which('chroma') else 1)"])
    if chroma.returncode != 0:
        pytest.skip("the chroma server command is not installed")
    from ctxwarden.policies.poisoning.kb import Document, KnowledgeBase
    from ctxwarden.proxy.config import StorageConfig
    from ctxwarden.proxy.local_server import free_port
    from ctxwarden.proxy.storage import ChromaStore

    port = free_port()
    server = subprocess.Popen(["chroma", "run", "--path", str(tmp_path / "shared"), "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        config = StorageConfig(chroma_url=url)
        reader_kb = _wait_for(lambda: KnowledgeBase(ChromaStore(config), HashEmbedder(), "acme", 0.0))
        script = ("import sys; from tests.test_kb_durability import HashEmbedder;"
                  "from ctxwarden.policies.poisoning.kb import Document, KnowledgeBase;"
                  "from ctxwarden.proxy.config import StorageConfig; from ctxwarden.proxy.storage import ChromaStore;"
                  f"kb = KnowledgeBase(ChromaStore(StorageConfig(chroma_url={url!r})), HashEmbedder(), 'acme');"
                  "kb.add([Document('hq', sys.argv[1], {})])")
        subprocess.run([sys.executable, "-c", script, "Acme's head office is in Mumbai."], check=True, cwd=str(ROOT))
        assert [s.text for s in reader_kb.index.sentences] == ["Acme's head office is in Mumbai."]
        subprocess.run([sys.executable, "-c", script, "Acme's head office is in Berlin."], check=True, cwd=str(ROOT))
        assert [s.text for s in reader_kb.index.sentences] == ["Acme's head office is in Berlin."]
        assert isinstance(Document, type)
    finally:
        server.terminate()
        server.wait(timeout=20)


# ---------------------------------------------------------------------------- the store's own repairs


class InternalError(Exception):
    """Named as Chroma names the error of a damaged vector index."""


def test_reading_a_tenant_that_never_wrote_creates_nothing(tmp_path):
    kb = open_kb(str(tmp_path / "store"))
    assert len(kb.index) == 0 and kb.documents() == ([], 0) and kb.count() == 0 and kb.document("x") is None
    assert kb.store.client.list_collections() == []  # one tenant per request must not mean two empty collections


def test_data_collections_keep_their_vector_index_in_the_log_only(tmp_path):
    from ctxwarden.policies.poisoning.kb import Document
    from ctxwarden.policies.poisoning.kbstore import LOG_ONLY

    kb = open_kb(str(tmp_path / "store"))
    kb.add([Document("hq", "Acme's head office is in Mumbai.", {})])
    assert kb.collection.configuration_json["hnsw"]["sync_threshold"] == LOG_ONLY


def test_a_damaged_data_collection_is_rebuilt_and_the_write_goes_through(tmp_path, monkeypatch):
    from ctxwarden.policies.poisoning.kb import Document

    path = str(tmp_path / "store")
    kb = open_kb(path)
    kb.add([Document(f"d{i}", f"Fact number {i} holds. It is true.", {}) for i in range(5)])
    first = kb.storage.data_name()
    real_collection = kb.store.own_collection

    class Damaged:
        def __init__(self, col):
            self._col = col

        def __getattr__(self, name):
            if name in ("upsert", "delete", "add"):
                def fail(*args, **kwargs):
                    raise InternalError("Error in compaction: Failed to apply logs to the hnsw segment writer")
                return fail
            return getattr(self._col, name)

    def collection(name, tenant=None):
        col = real_collection(name, tenant)
        return Damaged(col) if name == first else col

    monkeypatch.setattr(kb.store, "own_collection", collection)
    kb.add([Document("d0", "Fact number 0 changed. It is new.", {})])
    assert kb.storage.data_name() == "kb.r1"
    fresh = open_kb(path)  # another reader: the pointer, the copy and the new write
    texts = {d.id: d.text for d in fresh.documents()[0]}
    assert texts == {"d0": "Fact number 0 changed. It is new.",
                     **{f"d{i}": f"Fact number {i} holds. It is true." for i in range(1, 5)}}
    assert sorted(s.text for s in fresh.index.sentences if s.doc_id == "d0") == ["Fact number 0 changed.", "It is new."]


def test_the_log_is_compacted_into_a_fresh_collection(tmp_path, monkeypatch):
    import ctxwarden.policies.poisoning.kbstore as kbstore
    from ctxwarden.policies.poisoning.kb import Document

    monkeypatch.setattr(kbstore, "COMPACT_MIN", 40)
    path = str(tmp_path / "store")
    kb, reader = open_kb(path), open_kb(path)
    for version in range(12):  # 3 documents of 2 passages replaced: 12 rows in the log per write
        kb.add([Document(f"d{i}", f"Doc {i} version {version}. Still doc {i}.", {}) for i in range(3)])
    name = kb.storage.data_name()
    assert name.startswith("kb.r"), name
    assert kb.count() == 6  # only the live passages were copied
    assert {d.text for d in reader.documents()[0]} == {f"Doc {i} version 11. Still doc {i}." for i in range(3)}
    assert len(reader.index) == 6
    client = kb.store.client
    names = {c.name for c in client.list_collections()}
    from ctxwarden.proxy.storage import collection_name
    assert collection_name("kb", "acme") not in names  # the old collection went, with its log


def _wait_for(make, timeout_s: float = 30.0):
    deadline = time.monotonic() + timeout_s
    while True:
        kb = make()
        try:
            kb.count()
            return kb
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


if __name__ == "__main__":
    writer(sys.argv[1], int(sys.argv[2]))


def test_a_current_index_is_read_without_a_thread_hop(tmp_path, monkeypatch):
    """A request's policies cost about 0.1 ms; a hop to a worker thread to read an index that no
    change can have touched cost more than that on every request (and streamed first chunks)."""
    import asyncio

    kb = open_kb(str(tmp_path / "store"), refresh_s=60.0)
    hops = []
    real = asyncio.to_thread

    async def counting(fn, *args):
        hops.append(fn)
        return await real(fn, *args)

    monkeypatch.setattr(asyncio, "to_thread", counting)
    asyncio.run(kb.refreshed())
    assert len(hops) == 1 and kb.current  # the first load goes to a thread
    asyncio.run(kb.refreshed())
    assert len(hops) == 1  # current: read in place
    kb.refresh_s = 0.0  # a look for changes is due: back to the thread
    asyncio.run(kb.refreshed())
    assert len(hops) == 2
