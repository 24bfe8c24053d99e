"""State that outlives one request: what a policy remembers per session, and content versions.

A policy keeps its per-session state in a `SessionLRU` (live objects, in this process). When the
proxy runs with a shared state backend (Redis, for replicas), the pipeline loads the session's
documents once before the request policies run, `hydrate`s each policy's entry from them, and
after the request (and again when the exchange completes) writes back what `export` gives when
it differs from what was loaded. Policy code reads and writes its objects as before; replicas
see each other's changes from the next request on. Without a shared backend nothing is encoded.

Content versions (`Versions`, on `Services.versions`) tell every replica's in-memory indexes
that a knowledge base changed, within about a second.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Callable, Generic, Hashable, Protocol, TypeVar

from .cache import LRU

log = logging.getLogger("ctxwarden.state")

S = TypeVar("S")


class Versions(Protocol):
    """Content versions every replica sees (a knowledge base changed: reload its index)."""

    def current(self, name: str) -> int:
        """The newest version of `name` this process has seen (no I/O; 0 when never published)."""
        ...

    def publish(self, name: str) -> int:
        """`name` changed: bump its version for every replica. May do I/O (call it off the event
        loop). Never raises: a backend that is down is reported, and the change is seen locally."""
        ...


class LocalVersions:
    """Versions within one process: the default, and what a degraded backend falls back to."""

    def __init__(self) -> None:
        self._versions: dict[str, int] = {}

    def current(self, name: str) -> int:
        return self._versions.get(name, 0)

    def publish(self, name: str) -> int:
        self._versions[name] = self._versions.get(name, 0) + 1
        return self._versions[name]

    def seen(self, name: str, version: int) -> None:
        """The version as read from the shared backend, which is authoritative: it is taken even when
        lower (a Redis restarted empty counts again from 1), so any change counts as a change."""
        self._versions[name] = version


class SessionLRU(LRU[Hashable, S], Generic[S]):
    """A policy's per-session state, keyed by `Exchange.session_key`, that a shared backend can
    carry between replicas: `encode(state) → JSON-able`, `decode(JSON-able) → state`."""

    def __init__(self, max_entries: int, ttl_s: float | None, *, encode: Callable[[S], Any],
                 decode: Callable[[Any], S]) -> None:
        super().__init__(max_entries, ttl_s)
        self._encode = encode
        self._decode = decode

    def export(self, key: Hashable) -> str | None:
        """The session's state as a document, or None when there is none."""
        state = self.get(key)
        if state is None:
            return None
        return json.dumps(self._encode(state), ensure_ascii=False, separators=(",", ":"), sort_keys=True)

    def hydrate(self, key: Hashable, doc: str | None) -> None:
        """Take the shared document as the session's state. No document: the local entry stays (a
        new session, or state kept here while the backend was down, written back after this request)."""
        if doc is None:
            return
        try:
            self.put(key, self._decode(json.loads(doc)))
        except Exception as exc:  # a document from another version of the proxy: start the session afresh
            log.warning("session state %r could not be read (%s: %s); kept the local state", key, type(exc).__name__, exc)
