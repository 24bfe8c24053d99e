"""Per-minute aggregates in one small SQLite table (stdlib sqlite3, WAL) under `storage.path`.

Rows are (minute, metric, label) → value, added to on conflict, so several replicas that share
the file (same host, same `storage.path`) add up into the same series. Every method is blocking:
call it off the event loop.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Iterable

from ..sqlite_wal import immediate, open_wal

Key = tuple[str, str]  # (metric, label)
Row = tuple[int, str, str, float]  # (bucket start minute, metric, label, value)

SCHEMA = """CREATE TABLE IF NOT EXISTS dashboard_minutes (
    minute INTEGER NOT NULL,
    metric TEXT NOT NULL,
    label TEXT NOT NULL DEFAULT '',
    value REAL NOT NULL,
    PRIMARY KEY (minute, metric, label)
) WITHOUT ROWID"""
UPSERT = ("INSERT INTO dashboard_minutes (minute, metric, label, value) VALUES (?, ?, ?, ?) "
          "ON CONFLICT(minute, metric, label) DO UPDATE SET value = value + excluded.value")
PRUNE_EVERY_S = 3600.0


class MinuteStore:
    def __init__(self, path: Path, retention_days: float) -> None:
        self.path = path
        self.retention_days = retention_days
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._pruned_at = 0.0

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            self._db = open_wal(self.path, 5.0, (SCHEMA,))
        return self._db

    def add(self, counts: dict[tuple[int, str, str], float]) -> None:
        """Add {(minute, metric, label): value} to the table, in one transaction."""
        if not counts:
            return
        with self._lock:
            db = self._conn()
            with immediate(db):
                db.executemany(UPSERT, [(m, metric, label, v) for (m, metric, label), v in counts.items()])
            self._prune(db)

    def _prune(self, db: sqlite3.Connection) -> None:
        now = time.time()
        if now - self._pruned_at < PRUNE_EVERY_S:
            return
        self._pruned_at = now
        oldest = int(now // 60 - self.retention_days * 24 * 60)
        db.execute("DELETE FROM dashboard_minutes WHERE minute < ?", (oldest,))

    def rows(self, since_minute: int, step_minutes: int) -> Iterable[Row]:
        """Sums per bucket of `step_minutes` (the bucket's first minute), metric and label, since `since_minute`."""
        with self._lock:
            db = self._conn()
            return db.execute(
                "SELECT minute - ((minute - ?) % ?), metric, label, SUM(value) FROM dashboard_minutes "
                "WHERE minute >= ? GROUP BY 1, 2, 3", (since_minute, step_minutes, since_minute),
            ).fetchall()

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
