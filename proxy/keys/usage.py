"""What each client key has used: requests per minute and tokens per UTC day (its limits), and
totals for the dashboard (requests, tokens, last use).

`LocalUsage` counts in this process. `RedisUsage` counts in Redis (`ctxw:ku:<key id>:…`), so a
key's rate and budget hold across replicas; if Redis fails, it counts in this process until Redis
answers again (each replica then enforces the limits alone) and says so in the log.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

from .records import KeyRecord

log = logging.getLogger("ctxwarden.keys")

Refusal = tuple[str, str, int]  # (code, message, retry-after seconds)


def _windows(now: float) -> tuple[int, int, int, int]:
    """(minute number, seconds to the next minute, UTC day number, seconds to the next UTC midnight)."""
    minute, day = int(now // 60), int(now // 86400)
    return minute, max(1, math.ceil(60 - now % 60)), day, max(1, math.ceil(86400 - now % 86400))


def _refusal(record: KeyRecord, requests_this_minute: int, tokens_today: int, now: float) -> Refusal | None:
    _, to_minute, _, to_midnight = _windows(now)
    if record.requests_per_minute is not None and requests_this_minute > record.requests_per_minute:
        return ("rate_limit_exceeded", f"This key may send {record.requests_per_minute} requests a minute.", to_minute)
    if record.tokens_per_day is not None and tokens_today >= record.tokens_per_day:
        return ("token_budget_exceeded", f"This key's budget of {record.tokens_per_day} tokens a day is spent.", to_midnight)
    return None


class LocalUsage:
    def __init__(self) -> None:
        self.minutes: dict[str, tuple[int, int]] = {}  # key id → (minute, requests in it)
        self.days: dict[str, tuple[int, int]] = {}  # key id → (day, tokens in it)
        self.totals: dict[str, dict[str, Any]] = {}

    async def admit(self, record: KeyRecord, now: float | None = None) -> Refusal | None:
        now = time.time() if now is None else now
        minute, _, day, _ = _windows(now)
        seen_minute, count = self.minutes.get(record.id, (minute, 0))
        count = count + 1 if seen_minute == minute else 1
        self.minutes[record.id] = (minute, count)
        seen_day, tokens = self.days.get(record.id, (day, 0))
        return _refusal(record, count, tokens if seen_day == day else 0, now)

    async def charge(self, record: KeyRecord, tokens: int, now: float | None = None) -> None:
        now = time.time() if now is None else now
        _, _, day, _ = _windows(now)
        seen_day, used = self.days.get(record.id, (day, 0))
        self.days[record.id] = (day, (used if seen_day == day else 0) + tokens)
        total = self.totals.setdefault(record.id, {"requests": 0, "tokens": 0, "last_used": None})
        total["requests"] += 1
        total["tokens"] += tokens
        total["last_used"] = now

    async def report(self, ids: list[str]) -> dict[str, dict[str, Any]]:
        return {i: dict(self.totals[i]) for i in ids if i in self.totals}


class RedisUsage:
    PREFIX = "ctxw:ku:"

    def __init__(self, url: str, timeout_s: float = 0.25) -> None:
        import redis.asyncio

        self.client: Any = redis.asyncio.Redis.from_url(url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s,
                                                        decode_responses=True)
        self.fallback = LocalUsage()
        self.down = False

    def _failed(self, exc: Exception) -> None:
        if not self.down:
            log.warning("client key usage: Redis failed (%s: %s); counting in this process", type(exc).__name__, exc)
        self.down = True

    async def admit(self, record: KeyRecord, now: float | None = None) -> Refusal | None:
        now = time.time() if now is None else now
        minute, _, day, _ = _windows(now)
        base = self.PREFIX + record.id
        try:
            pipe = self.client.pipeline(transaction=False)
            pipe.incr(f"{base}:m:{minute}")
            pipe.expire(f"{base}:m:{minute}", 120)
            pipe.get(f"{base}:d:{day}")
            count, _, tokens = await pipe.execute()
        except Exception as exc:  # Redis down or slow: limits per replica until it answers
            self._failed(exc)
            return await self.fallback.admit(record, now)
        self.down = False
        return _refusal(record, int(count), int(tokens or 0), now)

    async def charge(self, record: KeyRecord, tokens: int, now: float | None = None) -> None:
        now = time.time() if now is None else now
        _, _, day, _ = _windows(now)
        base = self.PREFIX + record.id
        try:
            pipe = self.client.pipeline(transaction=False)
            pipe.incrby(f"{base}:d:{day}", tokens)
            pipe.expire(f"{base}:d:{day}", 2 * 86400)
            pipe.hincrby(base, "requests", 1)
            pipe.hincrby(base, "tokens", tokens)
            pipe.hset(base, "last_used", f"{now:.3f}")
            await pipe.execute()
        except Exception as exc:
            self._failed(exc)
            await self.fallback.charge(record, tokens, now)

    async def report(self, ids: list[str]) -> dict[str, dict[str, Any]]:
        try:
            pipe = self.client.pipeline(transaction=False)
            for key_id in ids:
                pipe.hgetall(self.PREFIX + key_id)
            found = await pipe.execute()
        except Exception as exc:
            self._failed(exc)
            return await self.fallback.report(ids)
        return {key_id: {"requests": int(doc.get("requests", 0)), "tokens": int(doc.get("tokens", 0)),
                         "last_used": float(doc["last_used"]) if doc.get("last_used") else None}
                for key_id, doc in zip(ids, found) if doc}

    async def aclose(self) -> None:
        await self.client.aclose()
