"""Client key usage in SQLite beside the keys (`<storage.path>/client_key_usage.sqlite3`), when
there is no Redis: every process on that path (`serve --workers 2`, two servers, the CLI) counts
into the same rows, and a restart (or a kill -9) does not hand every key a fresh rate and budget.

Each admission and charge is one short transaction (proxy/sqlite_wal.py: the count read and the
count written are one step across processes), run off the event loop. If the file cannot
be written (disk full, locked past the timeout), usage is counted in this process until it can,
as `RedisUsage` does when Redis fails.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from pathlib import Path
from typing import Any

from ..sqlite_wal import WalFile
from .records import KeyRecord
from .usage import NO_HOLD, Hold, LocalUsage, Refusal, _refusal, _windows, held

log = logging.getLogger("ctxwarden.keys")

FILE_NAME = "client_key_usage.sqlite3"
SCHEMA = (
    "CREATE TABLE IF NOT EXISTS key_minutes (key_id TEXT, minute INTEGER, requests INTEGER, PRIMARY KEY (key_id, minute))",
    "CREATE TABLE IF NOT EXISTS key_days (key_id TEXT, day INTEGER, tokens INTEGER, PRIMARY KEY (key_id, day))",
    "CREATE TABLE IF NOT EXISTS key_totals (key_id TEXT PRIMARY KEY, requests INTEGER, tokens INTEGER, last_used REAL)",
)
ADD_REQUEST = ("INSERT INTO key_minutes VALUES (?, ?, 1) ON CONFLICT (key_id, minute) "
               "DO UPDATE SET requests = requests + 1 RETURNING requests")
ADD_TOKENS = ("INSERT INTO key_days VALUES (?, ?, ?) ON CONFLICT (key_id, day) "
              "DO UPDATE SET tokens = tokens + excluded.tokens")
ADD_TOTAL = ("INSERT INTO key_totals VALUES (?, 1, ?, ?) ON CONFLICT (key_id) DO UPDATE SET "
             "requests = requests + 1, tokens = tokens + excluded.tokens, last_used = excluded.last_used")
PRUNE_EVERY_S = 600.0  # minutes older than the last two and days older than the last two go


class FileUsage:
    def __init__(self, directory: str | Path, timeout_s: float = 2.0) -> None:
        self.file = WalFile(Path(directory) / FILE_NAME, SCHEMA, timeout_s)
        self.path = self.file.path
        self.fallback = LocalUsage()
        self.down = False
        self._pruned_at = 0.0

    async def _run(self, work: Any) -> Any:
        result = await self.file.run(work)
        if self.down:
            log.warning("client key usage: %s answers again", self.path)
        self.down = False
        return result

    def _failed(self, exc: Exception) -> None:
        if not self.down:
            log.warning("client key usage: %s failed (%s: %s); counting in this process", self.path, type(exc).__name__, exc)
        self.down = True

    async def admit(self, record: KeyRecord, estimate: int = 0, now: float | None = None) -> tuple[Refusal | None, Hold]:
        now = time.time() if now is None else now
        minute, _, day, _ = _windows(now)

        def work(db: sqlite3.Connection) -> tuple[Refusal | None, Hold]:
            (count,) = db.execute(ADD_REQUEST, (record.id, minute)).fetchone()
            row = db.execute("SELECT tokens FROM key_days WHERE key_id = ? AND day = ?", (record.id, day)).fetchone()
            tokens = row[0] if row else 0
            refused = _refusal(record, count, tokens, now)
            hold = 0 if refused else held(record, estimate, tokens)
            if hold:
                db.execute(ADD_TOKENS, (record.id, day, hold))
            self._prune(db, minute, day)
            return refused, Hold(hold, day)

        try:
            return await self._run(work)
        except Exception as exc:
            self._failed(exc)
            return await self.fallback.admit(record, estimate, now)

    async def charge(self, record: KeyRecord, tokens: int, hold: Hold = NO_HOLD, now: float | None = None) -> None:
        now = time.time() if now is None else now
        day = hold.charged_day(now)

        def work(db: sqlite3.Connection) -> None:
            db.execute(ADD_TOKENS, (record.id, day, tokens - hold.tokens))
            db.execute(ADD_TOTAL, (record.id, tokens, now))

        try:
            await self._run(work)
        except Exception as exc:
            self._failed(exc)
            await self.fallback.charge(record, tokens, hold, now)

    async def report(self, ids: list[str]) -> dict[str, dict[str, Any]]:
        def work(db: sqlite3.Connection) -> list[tuple[Any, ...]]:
            marks = ",".join("?" * len(ids))
            return db.execute(f"SELECT key_id, requests, tokens, last_used FROM key_totals WHERE key_id IN ({marks})",
                              ids).fetchall() if ids else []

        try:
            rows = await self._run(work)
        except Exception as exc:
            self._failed(exc)
            return await self.fallback.report(ids)
        found = {key_id: {"requests": requests, "tokens": tokens, "last_used": last} for key_id, requests, tokens, last in rows}
        for key_id, counted in (await self.fallback.report(ids)).items():  # what was counted here while the file failed
            mine = found.setdefault(key_id, {"requests": 0, "tokens": 0, "last_used": None})
            mine["requests"] += counted["requests"]
            mine["tokens"] += counted["tokens"]
            mine["last_used"] = max(mine["last_used"] or 0, counted["last_used"] or 0) or None
        return found

    def _prune(self, db: sqlite3.Connection, minute: int, day: int) -> None:
        if time.monotonic() - self._pruned_at < PRUNE_EVERY_S:
            return
        self._pruned_at = time.monotonic()
        db.execute("DELETE FROM key_minutes WHERE minute < ?", (minute - 2,))
        db.execute("DELETE FROM key_days WHERE day < ?", (day - 2,))

    async def aclose(self) -> None:
        self.file.close()
