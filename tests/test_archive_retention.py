"""Archive retention: archived texts past archive.retention_days are neither served nor kept, and a
tenant's collection stays near archive.max_items however much is archived (real Chroma)."""

from __future__ import annotations

import asyncio
import time

import pytest

import ctxwarden.policies.history.scratchpad as scratchpad_module
from ctxwarden.policies.base import Services
from ctxwarden.policies.history.archive import ArchiveConfig, ArchivePolicy
from ctxwarden.policies.history.policy import HistoryConfig, HistoryPolicy
from ctxwarden.policies.history.scratchpad import COLLECTION, PRUNE_EVERY, Scratchpad
from ctxwarden.policies.text.tokens import TiktokenCounter
from ctxwarden.proxy.config import StorageConfig, load_settings
from ctxwarden.proxy.storage import ChromaStore
from tests.test_history_units import RecordingMetrics


class Clock:
    """time.time() under the test's control; perf_counter unchanged."""

    def __init__(self) -> None:
        self.now = time.time()

    def time(self) -> float:
        return self.now

    def perf_counter(self) -> float:
        return time.perf_counter()


@pytest.fixture
def clock(monkeypatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(scratchpad_module, "time", fake)
    return fake


@pytest.fixture
def services(tmp_path) -> Services:
    return Services(tokens=TiktokenCounter(), metrics=RecordingMetrics(), store=ChromaStore(StorageConfig(path=str(tmp_path))))


def stored(services: Services, tenant: str) -> int:
    return services.store.collection(COLLECTION, tenant).count()


def test_entries_past_the_retention_are_not_served_and_are_deleted_on_later_writes(services, clock):
    pad = Scratchpad(services, memory_entries=10, retention_s=3600, max_items=10_000)
    for i in range(5):
        pad.put("acme", f"ar_old{i:010d}", f"old result {i}")
    clock.now += 2 * 3600  # two hours later: the retention is one hour
    assert asyncio.run(pad.get("acme", "ar_old0000000004")) is None  # in memory, but expired
    assert asyncio.run(pad.get("acme", "ar_old0000000000")) is None  # only in the store, expired
    for i in range(PRUNE_EVERY + 1):  # enough writes for a prune
        pad.put("acme", f"ar_new{i:010d}", f"new result {i}")
    assert stored(services, "acme") == PRUNE_EVERY + 1  # the five old ones are gone
    assert asyncio.run(pad.get("acme", f"ar_new{PRUNE_EVERY:010d}")) == f"new result {PRUNE_EVERY}"
    assert sum(v for name, v, _ in services.metrics.added if name == "ctxwarden.scratchpad.pruned") == 5


def test_a_tenant_collection_stays_near_max_items_oldest_first(services, clock):
    pad = Scratchpad(services, memory_entries=10, retention_s=86_400, max_items=50)
    for i in range(600):
        clock.now += 1
        pad.put("acme", f"ar_item{i:010d}", f"result {i}")
        if i < 20:
            pad.put("globex", f"ar_item{i:010d}", f"result {i}")
    assert stored(services, "acme") <= 50 * 1.1 + 50 // 10  # bounded: pruned every max_items / 10 writes
    pad.prune("acme")
    assert stored(services, "acme") <= 55
    assert asyncio.run(pad.get("acme", "ar_item0000000599")) == "result 599"  # the newest stay
    assert asyncio.run(pad.get("acme", "ar_item0000000000")) is None  # the oldest went
    assert stored(services, "globex") == 20  # per tenant


def test_the_archive_config_sets_retention_on_the_shared_scratchpad(services):
    history = HistoryPolicy(HistoryConfig(), services)  # made the shared scratchpad first
    archive = ArchivePolicy(ArchiveConfig(retention_days=2, max_items=123), services)
    assert archive.scratchpad is history.scratchpad
    assert history.scratchpad.retention_s == 2 * 86_400 and history.scratchpad.max_items == 123


def test_the_default_config_documents_retention():
    archive = load_settings().policy_configs()["archive"]
    assert archive.retention_days == 7 and archive.max_items == 10_000


def test_a_text_is_kept_in_its_row_s_metadata_and_a_row_written_as_a_document_still_reads(services):
    """Embedded Chroma indexes a row's document for full-text search as it writes it (~4x the write);
    the archive keeps its text in the metadata instead, and reads rows written before that as they are."""
    from ctxwarden.policies.history.archive_rows import TEXT_KEY, lexical_vector

    pad = Scratchpad(services, memory_entries=1)
    pad.put("acme", "ar_new0000000001", "the new way " * 100)
    pad.put("acme", "ar_pad0000000002", "pushes the first out of memory")
    asyncio.run(pad.flush())
    col = services.store.collection(COLLECTION, "acme")
    row = col.get(ids=["ar_new0000000001"], include=["documents", "metadatas"])
    assert row["documents"] == [None] and row["metadatas"][0][TEXT_KEY] == "the new way " * 100
    col.upsert(ids=["ar_old0000000003"], documents=["written as a document"], embeddings=[lexical_vector("x")],
               metadatas=[{"kind": "tool_result", "created": time.time()}])
    pad.memory.clear()
    assert asyncio.run(pad.get("acme", "ar_new0000000001")) == "the new way " * 100  # from the store
    assert asyncio.run(pad.get("acme", "ar_old0000000003")) == "written as a document"


def test_pruning_to_max_items_finds_the_oldest_without_reading_their_texts(services, clock, monkeypatch):
    pad = Scratchpad(services, memory_entries=10, retention_s=86_400, max_items=40)
    for i in range(60):  # no event loop: each write goes at once, and every 4th prunes to ~40
        clock.now += 1
        pad.put("acme", f"ar_item{i:010d}", f"result {i} " + "x" * 5000)
    assert 40 <= stored(services, "acme") <= 44
    col = services.store.collection(COLLECTION, "acme")
    reads: list = []
    original = type(col).get
    monkeypatch.setattr(type(col), "get", lambda self, *a, **k: reads.append(k.get("include")) or original(self, *a, **k))
    pad.max_items = 20  # lowered: the next prune goes down to the newest 20
    pad.prune("acme")
    assert stored(services, "acme") == 20
    assert reads and all(include == [] for include in reads), reads  # ids only: no metadata, where the texts are
    assert asyncio.run(pad.get("acme", "ar_item0000000039")) is None
    assert asyncio.run(pad.get("acme", "ar_item0000000040")).startswith("result 40 ")


class _Rows:
    """A collection's `get(where={"created": {"$lt": t}}, include=[])`, over (id, created or None) rows."""

    def __init__(self, rows: list[tuple[str, float | None]]) -> None:
        self.rows = rows

    def get(self, where: dict, include: list) -> dict:
        assert include == []
        limit = where["created"]["$lt"]
        return {"ids": [i for i, created in self.rows if created is not None and created < limit]}


def test_the_oldest_rows_are_found_by_creation_time_and_undated_rows_never_take_dated_ones_with_them():
    from ctxwarden.policies.history.archive_rows import created_before

    rows = _Rows([(f"r{i}", 1000.0 + i * 0.5) for i in range(100)])
    assert sorted(created_before(rows, 30, 900.0, 1100.0), key=lambda r: int(r[1:])) == [f"r{i}" for i in range(30)]
    undated = _Rows([(f"r{i}", 1000.0 + i) for i in range(10)] + [(f"u{i}", None) for i in range(50)])
    assert created_before(undated, 20, 900.0, 1100.0) == []  # 10 dated rows cannot make 20: none is deleted
