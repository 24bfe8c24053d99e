"""What each client key has used: requests per minute and tokens per UTC day (its limits), and
totals for the dashboard (requests, tokens, last use).

`RedisUsage` counts in Redis (`ctxw:ku:<key id>:…`), so a key's rate and budget hold across
replicas; `FileUsage` (usage_file.py) counts in SQLite beside the keys when there is no Redis, so
they hold across the processes on one storage path and across restarts. Either, when its store
fails, counts in this process (`LocalUsage`) until the store answers again (each process then
enforces the limits alone) and says so in the log.

A request's tokens are known only when its answer is over, so requests in flight at once would all
pass a budget that has a little left. Admission therefore holds the request's estimated prompt
tokens on the day's count at once (at most what is left of the budget), and the charge replaces
the hold by what the answer used: concurrent requests see each other's holds.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import Any

from .records import KeyRecord

log = logging.getLogger("ctxwarden.keys")

Refusal = tuple[str, str, int]  # (code, message, retry-after seconds)


@dataclass(frozen=True)
class Hold:
    """Tokens held on a key's day count from admission until the charge settles them."""

    tokens: int = 0
    day: int = 0

    def charged_day(self, now: float) -> int:
        """The day a charge goes to: the hold's (a request that ran over midnight settles where it held),
        else today's."""
        return self.day if self.tokens else _windows(now)[2]


NO_HOLD = Hold()


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


def held(record: KeyRecord, estimate: int, tokens_today: int) -> int:
    """What an admitted request holds: its estimate, at most what the budget has left (a request is
    admitted while anything is left, as without holds)."""
    if record.tokens_per_day is None or estimate <= 0:
        return 0
    return max(0, min(estimate, record.tokens_per_day - tokens_today))


class LocalUsage:
    def __init__(self) -> None:
        self.minutes: dict[str, tuple[int, int]] = {}  # key id → (minute, requests in it)
        self.days: dict[str, tuple[int, int]] = {}  # key id → (day, tokens in it)
        self.totals: dict[str, dict[str, Any]] = {}

    async def admit(self, record: KeyRecord, estimate: int = 0, now: float | None = None) -> tuple[Refusal | None, Hold]:
        now = time.time() if now is None else now
        minute, _, day, _ = _windows(now)
        seen_minute, count = self.minutes.get(record.id, (minute, 0))
        count = count + 1 if seen_minute == minute else 1
        self.minutes[record.id] = (minute, count)
        seen_day, tokens = self.days.get(record.id, (day, 0))
        tokens = tokens if seen_day == day else 0
        refused = _refusal(record, count, tokens, now)
        if refused:
            return refused, NO_HOLD
        hold = held(record, estimate, tokens)
        self.days[record.id] = (day, tokens + hold)
        return None, Hold(hold, day)

    async def charge(self, record: KeyRecord, tokens: int, hold: Hold = NO_HOLD, now: float | None = None) -> None:
        now = time.time() if now is None else now
        day = hold.charged_day(now)
        seen_day, used = self.days.get(record.id, (day, 0))
        if seen_day == day:
            self.days[record.id] = (day, used + tokens - hold.tokens)
        elif seen_day < day:  # a new day (a hold of yesterday's is gone with it)
            self.days[record.id] = (day, tokens)
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

    async def admit(self, record: KeyRecord, estimate: int = 0, now: float | None = None) -> tuple[Refusal | None, Hold]:
        now = time.time() if now is None else now
        minute, _, day, _ = _windows(now)
        base = self.PREFIX + record.id
        wanted = estimate if record.tokens_per_day is not None and estimate > 0 else 0
        try:
            pipe = self.client.pipeline(transaction=False)
            pipe.incr(f"{base}:m:{minute}")
            pipe.expire(f"{base}:m:{minute}", 120)
            pipe.incrby(f"{base}:d:{day}", wanted)  # held at once (atomic), given back below if refused or too much
            pipe.expire(f"{base}:d:{day}", 2 * 86400)
            count, _, after, _ = await pipe.execute()
            before = int(after) - wanted
            refused = _refusal(record, int(count), before, now)
            hold = 0 if refused else held(record, wanted, before)
            if wanted - hold:
                await self.client.decrby(f"{base}:d:{day}", wanted - hold)
        except Exception as exc:  # Redis down or slow: limits per replica until it answers
            self._failed(exc)
            return await self.fallback.admit(record, estimate, now)
        self.down = False
        return refused, Hold(hold, day)

    async def charge(self, record: KeyRecord, tokens: int, hold: Hold = NO_HOLD, now: float | None = None) -> None:
        now = time.time() if now is None else now
        day = hold.charged_day(now)
        base = self.PREFIX + record.id
        try:
            pipe = self.client.pipeline(transaction=False)
            pipe.incrby(f"{base}:d:{day}", tokens - hold.tokens)
            pipe.expire(f"{base}:d:{day}", 2 * 86400)
            pipe.hincrby(base, "requests", 1)
            pipe.hincrby(base, "tokens", tokens)
            pipe.hset(base, "last_used", f"{now:.3f}")
            await pipe.execute()
        except Exception as exc:
            self._failed(exc)
            await self.fallback.charge(record, tokens, hold, now)

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
