"""Quarantine: suspicious content held for a human, kept in a Chroma collection.

Why Chroma rather than a JSON or SQLite file under storage.path: it is the store the proxy
already runs, it persists across restarts in the embedded mode, and with `storage.chroma_url`
every replica shares one review queue (a file would give each replica its own). The vectors
(of the quarantined text, from services.embedder) also let reviewers find similar items.

An item's id is a hash of its tenant and text, so the same answer quarantined twice is one
item (with `occurrences` counted), and a text a human already approved or rejected is
recognised when it comes again. All methods are synchronous: call them via asyncio.to_thread.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

from ..base import Embedder, Store
from ..cache import stable_hash

COLLECTION = "quarantine"
PENDING, APPROVED, REJECTED = "pending", "approved", "rejected"
STATUSES = (PENDING, APPROVED, REJECTED)


def item_id(text: str, tenant: str | None) -> str:
    return "q_" + stable_hash([tenant or "", text])[:16]


class QuarantineStore:
    def __init__(self, store: Store, embedder: Embedder) -> None:
        self.store = store
        self.embedder = embedder
        self._lock = threading.RLock()
        self._pending: Counter[str] | None = None  # pending items by type, counted once then kept up to date

    @property
    def collection(self) -> Any:
        return self.store.collection(COLLECTION)

    def put(self, text: str, *, tenant: str | None, kind: str, source: str, claim: str, evidence: str,
            confidence: float, request_id: str = "", session: str = "", model: str = "",
            checker: str = "local") -> dict[str, Any]:
        """Hold `text` for review; the same text again only counts another occurrence."""
        qid = item_id(text, tenant)
        with self._lock:
            existing = self.get(qid)
            if existing:
                meta = {k: v for k, v in existing.items() if k not in ("id", "text")}
                meta["occurrences"] = int(meta.get("occurrences", 1)) + 1
                meta["last_seen"] = time.time()
                self.collection.update(ids=[qid], metadatas=[meta])
                return {**existing, **meta}
            now = time.time()
            meta = {
                "status": PENDING, "type": kind or "unknown", "source": source, "claim": claim,
                "evidence": evidence, "confidence": round(float(confidence), 3), "tenant": tenant or "",
                "request_id": request_id, "session": session, "model": model, "created_at": now,
                "last_seen": now, "occurrences": 1, "reviewed_at": 0.0, "note": "", "checker": checker,
            }
            vector = self.embedder.embed([text])
            self.collection.add(ids=[qid], documents=[text], metadatas=[meta], embeddings=vector)
            if self._pending is not None:
                self._pending[meta["type"]] += 1
        return {"id": qid, "text": text, **meta}

    def get(self, qid: str) -> dict[str, Any] | None:
        got = self.collection.get(ids=[qid], include=["documents", "metadatas"])
        if not got["ids"]:
            return None
        return {"id": qid, "text": got["documents"][0], **got["metadatas"][0]}

    def status_of(self, text: str, tenant: str | None) -> str | None:
        """pending/approved/rejected when this exact text was quarantined before, else None."""
        item = self.get(item_id(text, tenant))
        return item["status"] if item else None

    def review(self, qid: str, status: str, note: str = "") -> dict[str, Any] | None:
        if status not in (APPROVED, REJECTED):
            raise ValueError(f"a review is {APPROVED} or {REJECTED}, not {status!r}")
        with self._lock:
            item = self.get(qid)
            if item is None:
                return None
            meta = {k: v for k, v in item.items() if k not in ("id", "text")}
            was_pending = meta.get("status") == PENDING
            meta.update(status=status, reviewed_at=time.time(), note=note[:1000])
            self.collection.update(ids=[qid], metadatas=[meta])
            if was_pending and self._pending is not None:
                self._pending[meta.get("type", "unknown")] -= 1
            return {**item, **meta}

    def items(self, status: str | None = None, tenant: str | None = None, limit: int = 100, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
        """Items, newest first, optionally by status and tenant; and how many match."""
        clauses = []
        if status:
            clauses.append({"status": status})
        if tenant is not None:
            clauses.append({"tenant": tenant})
        where = clauses[0] if len(clauses) == 1 else ({"$and": clauses} if clauses else None)
        got = self.collection.get(where=where, include=["documents", "metadatas"])
        rows = [{"id": i, "text": d, **m} for i, d, m in zip(got["ids"], got["documents"], got["metadatas"])]
        rows.sort(key=lambda r: r.get("created_at", 0), reverse=True)
        return rows[offset : offset + limit], len(rows)

    def pending_by_type(self, fresh: bool = False) -> dict[str, int]:
        """Pending items by type: counted from the store once (or when `fresh`), then kept up to date
        by this process's writes (another replica's writes show after a fresh count)."""
        with self._lock:
            if self._pending is None or fresh:
                got = self.collection.get(where={"status": PENDING}, include=["metadatas"])
                self._pending = Counter(m.get("type", "unknown") for m in got["metadatas"])
            return dict(self._pending)  # zeros kept: a type whose items were all reviewed reports 0
