"""Per-minute aggregates in one small SQLite table (stdlib sqlite3, WAL) under `storage.path`.

Rows are (minute, metric, label) → value, added to on conflict, so several replicas that share
the file (same host, same `storage.path`) add up into the same series. Every method is blocking:
call it off the event loop.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Iterable

from ..sqlite_wal import WalFile

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
        self.file = WalFile(path, (SCHEMA,), timeout_s=5.0)
        self.path = path
        self.retention_days = retention_days
        self._pruned_at = 0.0

    def add(self, counts: dict[tuple[int, str, str], float]) -> None:
        """Add {(minute, metric, label): value} to the table, in one transaction."""
        if not counts:
            return

        def work(db: sqlite3.Connection) -> None:
            db.executemany(UPSERT, [(m, metric, label, v) for (m, metric, label), v in counts.items()])
            self._prune(db)

        self.file.transaction(work)

    def _prune(self, db: sqlite3.Connection) -> None:
        now = time.time()
        if now - self._pruned_at < PRUNE_EVERY_S:
            return
        self._pruned_at = now
        oldest = int(now // 60 - self.retention_days * 24 * 60)
        db.execute("DELETE FROM dashboard_minutes WHERE minute < ?", (oldest,))

    def rows(self, since_minute: int, step_minutes: int) -> Iterable[Row]:
        """Sums per bucket of `step_minutes` (the bucket's first minute), metric and label, since `since_minute`."""
        return self.file.read(lambda db: db.execute(
            "SELECT minute - ((minute - ?) % ?), metric, label, SUM(value) FROM dashboard_minutes "
            "WHERE minute >= ? GROUP BY 1, 2, 3", (since_minute, step_minutes, since_minute),
        ).fetchall())

    def close(self) -> None:
        self.file.close()
