"""The two state backends: in this process (the default) and Redis (`state.redis_url`).

Redis holds, per session, one hash of policy → JSON document (`ctxw:s:<tenant slug>:<session
hash>`, expiring `session_ttl_s` after its last write), and one hash of content versions
(`ctxw:versions`). A request costs two round trips in the common case: HGETALL before the request
policies, one compare-and-set script after them when something changed. The script writes each
document only if the stored one is still the one the request loaded, and returns the stored
documents of the others (another replica wrote them meanwhile) for the caller to merge and retry.

When Redis fails or is slower than `timeout_s`, the backend is *degraded*: requests skip it and
policies keep their state in this process (each response reports `state.degraded`), /readyz says
`"state": "degraded"` and `ctxwarden_state_backend_up` is 0. A background task reads the versions
every `poll_s`; its first success marks the backend up again, with no restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from typing import Any, Protocol

from ctxwarden.policies.state import LocalVersions

from ..config import StateConfig

log = logging.getLogger("ctxwarden.state")

VERSIONS_KEY = "ctxw:versions"
SESSION_PREFIX = "ctxw:s:"
UP_METRIC = "ctxwarden.state.backend_up"
MAX_CONNECTIONS = 128  # per replica
POOL_WAIT_S = 1.0  # how long a request waits for a free connection before it counts Redis as down

# KEYS[1]: the session hash. ARGV: ttl, then (policy, expected document or "" for none, new document)
# per policy. Writes the documents whose stored version is the expected one; returns (policy, stored
# document or "") for the others. A JSON document is never "", so "" can stand for "no document".
CAS_SCRIPT = """
local conflicts, wrote = {}, false
for i = 2, #ARGV, 3 do
  local stored = redis.call('HGET', KEYS[1], ARGV[i]) or ''
  if stored == ARGV[i + 1] then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 2])
    wrote = true
  else
    conflicts[#conflicts + 1] = ARGV[i]
    conflicts[#conflicts + 1] = stored
  end
end
if wrote then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return conflicts
"""


class StateBackend(Protocol):
    shared: bool  # state lives outside this process (the pipeline loads and saves session documents)

    @property
    def status(self) -> str: ...  # "local" | "ok" | "degraded"
    def current(self, name: str) -> int: ...
    def publish(self, name: str) -> int: ...
    async def load_session(self, scope: str) -> dict[str, str] | None: ...
    async def save_session(self, scope: str, docs: dict[str, str],
                           expected: dict[str, str | None]) -> dict[str, str | None] | None: ...
    async def start(self) -> None: ...
    async def aclose(self) -> None: ...


class LocalState(LocalVersions):
    """Everything in this process: nothing to install, one process (policies keep their own objects)."""

    shared = False
    status = "local"

    async def load_session(self, scope: str) -> dict[str, str] | None:
        return None

    async def save_session(self, scope: str, docs: dict[str, str],
                           expected: dict[str, str | None]) -> dict[str, str | None] | None:
        return None

    async def start(self) -> None:
        return None

    async def aclose(self) -> None:
        return None


class RedisState:
    shared = True

    def __init__(self, config: StateConfig, metrics: Any) -> None:
        import redis
        import redis.asyncio

        options = dict(socket_timeout=config.timeout_s, socket_connect_timeout=config.timeout_s,
                       decode_responses=True)
        self.config = config
        self.metrics = metrics
        # A blocking pool: a burst of more concurrent requests than connections waits for one (up to
        # POOL_WAIT_S) instead of failing with "Too many connections" and marking Redis down.
        pool = redis.asyncio.BlockingConnectionPool.from_url(
            config.redis_url, max_connections=MAX_CONNECTIONS, timeout=max(POOL_WAIT_S, config.timeout_s), **options)
        self.pool = pool  # closed by aclose() (Redis.from_pool needs redis-py ≥ 5.0.1)
        self.client = redis.asyncio.Redis(connection_pool=pool)
        self._cas = self.client.register_script(CAS_SCRIPT)  # EVALSHA; loads the script when Redis lacks it
        self._sync = redis.Redis.from_url(config.redis_url, **options)  # publish() runs in worker threads
        self.versions = LocalVersions()
        self.up = True  # until a call fails: the first request need not wait for the first poll
        self.last_error: str | None = None
        self._lock = threading.Lock()
        self._poller: asyncio.Task | None = None
        metrics.gauge(UP_METRIC, 1, backend="redis")

    @property
    def status(self) -> str:
        return "ok" if self.up else "degraded"

    def _mark(self, up: bool, error: BaseException | None = None) -> None:
        with self._lock:
            changed, self.up = self.up != up, up
            if error is not None:
                self.last_error = f"{type(error).__name__}: {error}"[:300]
        if changed:
            self.metrics.gauge(UP_METRIC, 1 if up else 0, backend="redis")
            if up:
                log.warning("state: Redis answers again; session state is shared between replicas again")
            else:
                log.error("state: Redis failed (%s); serving with per-process state until it answers", self.last_error)

    # ------------------------------------------------------------------ sessions

    async def load_session(self, scope: str) -> dict[str, str] | None:
        """The session's documents by policy; None while degraded."""
        if not self.up:
            return None
        try:
            return await self.client.hgetall(SESSION_PREFIX + scope)
        except Exception as exc:
            self._mark(False, exc)
            return None

    async def save_session(self, scope: str, docs: dict[str, str],
                           expected: dict[str, str | None]) -> dict[str, str | None] | None:
        """Compare-and-set: each document is written if the stored one is still `expected[policy]`
        (None: no document). Returns the conflicts, policy → the stored document (None: none), {}
        when all were written; None when Redis failed (nothing is known to be written)."""
        if not self.up:
            return None
        args: list[Any] = [max(1, int(self.config.session_ttl_s))]
        for name, doc in docs.items():
            args += [name, expected.get(name) or "", doc]
        try:
            found = await self._cas(keys=[SESSION_PREFIX + scope], args=args)
        except Exception as exc:
            self._mark(False, exc)
            return None
        return {found[i]: found[i + 1] or None for i in range(0, len(found), 2)}

    # ------------------------------------------------------------------ versions

    def current(self, name: str) -> int:
        return self.versions.current(name)

    def publish(self, name: str) -> int:
        try:
            version = int(self._sync.hincrby(VERSIONS_KEY, name, 1))
        except Exception as exc:  # the writer's own indexes refresh anyway; others see it by their refresh_s
            self._mark(False, exc)
            return self.versions.current(name)
        self.versions.seen(name, version)
        return version

    async def poll_once(self) -> None:
        try:
            versions = await self.client.hgetall(VERSIONS_KEY)
        except Exception as exc:
            self._mark(False, exc)
            return
        for name, version in versions.items():
            self.versions.seen(name, int(version))
        self._mark(True)

    async def _poll(self) -> None:
        while True:
            await self.poll_once()
            await asyncio.sleep(self.config.poll_s)

    async def start(self) -> None:
        if self._poller is None:
            self._poller = asyncio.create_task(self._poll(), name="ctxwarden-state-poll")

    async def aclose(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._poller
            self._poller = None
        with contextlib.suppress(Exception):
            await self.client.aclose()
        with contextlib.suppress(Exception):
            await self.pool.disconnect()
        with contextlib.suppress(Exception):
            self._sync.close()


def build_state(config: StateConfig, metrics: Any) -> StateBackend:
    return RedisState(config, metrics) if config.redis_url else LocalState()
