"""State that outlives one request: what a policy remembers per session, and content versions.

A policy keeps its per-session state in a `SessionLRU` (live objects, in this process). When the
proxy runs with a shared state backend (Redis, for replicas), the pipeline loads the session's
documents once before the request policies run, `hydrate`s each policy's entry from them, and
after the request (and again when the exchange completes) writes back what `export` gives when
it differs from what was loaded. Policy code reads and writes its objects as before; replicas
see each other's changes from the next request on. Without a shared backend nothing is encoded.

A write is a compare-and-set: it lands only if the stored document is still the one this request
loaded. When another replica wrote meanwhile, `reconcile` merges the three versions with the
policy's `merge(base, mine, theirs)`: base is what this request loaded (None: unknown, treat it
as the empty state), mine this replica's state, theirs what the other replica stored. Without a
`merge`, theirs wins (first writer wins: what frozen decisions need) and becomes the local entry.

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


Merge = Callable[[S | None, S, S], S]  # (base, mine, theirs) → the merged state
SESSION_STATE_BYTES = 8 * 2**20  # one policy's session states, at most (sized by their documents)


class SessionLRU(LRU[Hashable, S], Generic[S]):
    """A policy's per-session state, keyed by `Exchange.session_key`, that a shared backend can
    carry between replicas: `encode(state) → JSON-able`, `decode(JSON-able) → state`, and
    optionally `merge(base, mine, theirs) → state` for concurrent writes (default: theirs wins).

    Bounded by `max_bytes` too: a state is sized by its document (`state_size`) when it is put and,
    since policies change their states in place, again when its request ends (`remeasure`, called
    by the pipeline), so sessions that grow push the least recently used ones out."""

    def __init__(self, max_entries: int, ttl_s: float | None, *, encode: Callable[[S], Any],
                 decode: Callable[[Any], S], merge: Merge[S] | None = None,
                 max_bytes: int | None = SESSION_STATE_BYTES) -> None:
        self._encode = encode
        self._decode = decode
        self._merge = merge
        super().__init__(max_entries, ttl_s, max_bytes=max_bytes, sizeof=self.state_size if max_bytes else None,
                         budgeted=False)  # state, not a cache: the process's cache budget does not shrink it

    def state_size(self, key: Hashable, state: S) -> int:
        """About what an entry holds: five times its document's characters (its objects weigh more
        than their JSON: sets of short keys, ~1.5× this), its key's characters (a session id may be
        long) and ~500 bytes."""
        doc = json.dumps(self._encode(state), ensure_ascii=False, separators=(",", ":"), default=str)
        keys = key if isinstance(key, tuple) else (key,)
        return 500 + 5 * len(doc) + sum(len(k) for k in keys if isinstance(k, str))

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

    def reconcile(self, key: Hashable, base: str | None, theirs: str) -> None:
        """Another replica stored `theirs` since this one read `base`: the local entry becomes the
        merge of the three (theirs, without a `merge`). An unreadable `theirs` leaves mine as it is;
        an unreadable `base` counts as none."""
        try:
            their_state = self._decode(json.loads(theirs))
        except Exception as exc:
            log.warning("session state %r could not be read (%s: %s); kept the local state", key, type(exc).__name__, exc)
            return
        mine = self.get(key)
        if mine is None or self._merge is None:
            self.put(key, their_state)
            return
        try:
            base_state = None if base is None else self._decode(json.loads(base))
        except Exception:
            base_state = None
        try:
            self.put(key, self._merge(base_state, mine, their_state))
        except Exception:  # a merge that fails must not fail the request: first writer wins
            log.exception("session state %r could not be merged; took the stored state", key)
            self.put(key, their_state)
