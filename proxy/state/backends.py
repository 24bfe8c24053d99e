"""The two state backends: in this process (the default) and Redis (`state.redis_url`).

Redis holds, per session, one hash of policy → JSON document (`ctxw:s:<tenant slug>:<session
hash>`, expiring `session_ttl_s` after its last write), and one hash of content versions
(`ctxw:versions`). A request costs two round trips at most: HGETALL before the request policies,
one pipelined HSET + EXPIRE after them when something changed.

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


class StateBackend(Protocol):
    shared: bool  # state lives outside this process (the pipeline loads and saves session documents)

    @property
    def status(self) -> str: ...  # "local" | "ok" | "degraded"
    def current(self, name: str) -> int: ...
    def publish(self, name: str) -> int: ...
    async def load_session(self, scope: str) -> dict[str, str] | None: ...
    async def save_session(self, scope: str, docs: dict[str, str]) -> bool: ...
    async def start(self) -> None: ...
    async def aclose(self) -> None: ...


class LocalState(LocalVersions):
    """Everything in this process: nothing to install, one process (policies keep their own objects)."""

    shared = False
    status = "local"

    async def load_session(self, scope: str) -> dict[str, str] | None:
        return None

    async def save_session(self, scope: str, docs: dict[str, str]) -> bool:
        return False

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
        self.client = redis.asyncio.Redis.from_url(config.redis_url, max_connections=128, **options)
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

    async def save_session(self, scope: str, docs: dict[str, str]) -> bool:
        if not self.up:
            return False
        key = SESSION_PREFIX + scope
        try:
            async with self.client.pipeline(transaction=True) as pipe:
                pipe.hset(key, mapping=docs)
                pipe.expire(key, int(self.config.session_ttl_s))
                await pipe.execute()
            return True
        except Exception as exc:
            self._mark(False, exc)
            return False

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
            self._sync.close()


def build_state(config: StateConfig, metrics: Any) -> StateBackend:
    return RedisState(config, metrics) if config.redis_url else LocalState()
