"""Per-minute aggregates in Redis (`state.redis_url`): every replica adds into the same series, so
the dashboard of any replica shows the whole fleet.

One hash per minute (`ctxw:dash:<minute>`, field `metric<TAB>label`), added to with HINCRBYFLOAT
and expiring after `retention_days`. The same interface as MinuteStore; blocking (call it off the
event loop). A failed write raises (the collector keeps the counts for the next flush); a failed
read is logged and gives no rows, and `degraded` says so.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Iterable

from .store import Row

log = logging.getLogger("ctxwarden.dashboard")

PREFIX = "ctxw:dash:"
SEPARATOR = "\t"


class RedisMinuteStore:
    def __init__(self, redis_url: str, retention_days: float, timeout_s: float = 1.0) -> None:
        import redis

        self.client = redis.Redis.from_url(redis_url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s,
                                           decode_responses=True)
        self.retention_s = int(retention_days * 86400)
        self.path = "redis"  # named in log lines, like the SQLite store's file
        self.degraded = False

    def add(self, counts: dict[tuple[int, str, str], float]) -> None:
        if not counts:
            return
        pipe = self.client.pipeline(transaction=False)
        for (minute, metric, label), value in counts.items():
            pipe.hincrbyfloat(PREFIX + str(minute), f"{metric}{SEPARATOR}{label}", value)
        for minute in {m for m, _, _ in counts}:
            pipe.expire(PREFIX + str(minute), self.retention_s)
        pipe.execute()

    def rows(self, since_minute: int, step_minutes: int, until_minute: int | None = None) -> Iterable[Row]:
        last = until_minute if until_minute is not None else int(time.time() // 60)
        minutes = list(range(since_minute, last + 1))
        try:
            pipe = self.client.pipeline(transaction=False)
            for minute in minutes:
                pipe.hgetall(PREFIX + str(minute))
            found: list[dict[str, Any]] = pipe.execute()
        except Exception as exc:
            log.warning("dashboard: Redis unreadable (%s: %s); figures show this replica's unsent counts only",
                        type(exc).__name__, exc)
            self.degraded = True
            return []
        self.degraded = False
        rows: list[Row] = []
        for minute, fields in zip(minutes, found):
            bucket = minute - (minute - since_minute) % step_minutes
            for key, value in fields.items():
                metric, _, label = key.partition(SEPARATOR)
                rows.append((bucket, metric, label, float(value)))
        return rows
