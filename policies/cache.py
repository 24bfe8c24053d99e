"""Bounded memory: the one size-limited (and optionally time-limited) cache every policy uses,
the memo for pure functions (`cache_short`), both bounded by bytes, and the stable hashes that name
cache entries and stored ids."""

from __future__ import annotations

import functools
import hashlib
import json
import marshal
import pickle
import sys
import threading
import time
import weakref
from collections import OrderedDict
from typing import Any, Callable, Generic, Hashable, TypeVar

import orjson

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_MISSING: Any = object()


def stable_hash(value: Any) -> str:
    """A short, stable hash of any JSON-serialisable value (cache keys, ids)."""
    raw = value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()[:24]


def content_key(value: Any) -> str:
    """A key equal for equal JSON values, for in-process caches only, cheap enough for a whole request's
    tool list on every request: orjson writes 525 tools in ~0.13 ms (marshal ~0.4, json ~2); what it
    cannot write (an int past 64 bits, a value not from JSON) goes to marshal, then pickle. The bytes are
    hashed with Python's keyed SipHash (random per process: never a stored id) and keyed with their length."""
    try:
        raw = orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError is one
        try:
            raw = b"m" + marshal.dumps(value, 2)  # version 2 writes no back-references, which follow refcounts
        except ValueError:
            raw = b"p" + pickle.dumps(value, protocol=5)
    return f"{hash(raw) & 0xFFFFFFFFFFFFFFFF:016x}:{len(raw):x}"


def parts_hash(*parts: str | int | None) -> str:
    """A short, stable hash of a few scalars and texts, for in-memory cache keys that hold a whole
    message: `stable_hash` JSON-escapes a 500 KB tool result before hashing it (~7 ms a megabyte),
    this hashes its bytes (~0.9 ms). Each part is tagged with its type and length, so no two part
    lists give the same bytes. Not the same value as `stable_hash` of the list: never for stored ids."""
    digest = hashlib.sha256()
    for part in parts:
        raw = (part if isinstance(part, str) else repr(part)).encode("utf-8", "surrogatepass")  # a lone surrogate is valid JSON
        digest.update(b"%s%d:" % (b"s" if isinstance(part, str) else b"r", len(raw)))
        digest.update(raw)
    return digest.hexdigest()[:24]


# One memory budget for every byte-bounded cache of the process (config `server.cache_mb`): each
# cache's own bound (`max_bytes` as written where it is made, e.g. 8 MB of token counts) is its share,
# and all bounds are scaled so that the shares of the caches a default server makes add up to the
# budget. Each cache alone stayed bounded before, but together they allowed ~350 MB. Per-session
# state (SessionLRU) keeps its own bound: dropping it changes what a policy does, not what it costs.
# The caches' own bounds added up (30 LRUs, two of them the token counter's 8 MB each, 12 memos and the
# scratchpad's 32 MB of archived text) in a default server after varied traffic (the history policy's
# 8 MB token LRU is gone); +72 MB since the tools policy's index, catalog and facts shares were raised
# to hold a 525-tool MCP catalog (two tenants' indexes of it) at the default budget (policies/tools/);
# +8 MB for the history policy's per-session fronts (policies/history/forwarded.py).
NOMINAL_CACHE_BYTES = 514 * 2**20
_budget = {"scale": 1.0}
_bounded: weakref.WeakSet = weakref.WeakSet()  # every byte-bounded LRU alive, trimmed when the budget changes


def set_cache_budget(total_bytes: int | None) -> None:
    """Scale every byte-bounded cache (those made later too) so that their bounds add up to about
    `total_bytes` (None: each its own bound); caches already over their new bound shrink now."""
    _budget["scale"] = 1.0 if total_bytes is None else max(total_bytes, 1) / NOMINAL_CACHE_BYTES
    for cache in list(_bounded):
        cache.trim()


def cache_scale() -> float:
    """The factor every cache's own byte bound is multiplied by (1.0 until `set_cache_budget`)."""
    return _budget["scale"]


def cache_budget_bytes() -> int:
    """What the byte-bounded caches' bounds add up to now: the budget `set_cache_budget` was given, or
    their own bounds' sum when it was given none."""
    return round(_budget["scale"] * NOMINAL_CACHE_BYTES)


def cached_bytes() -> int:
    """What the byte-bounded LRUs hold now, by their own sizes (the `cache_short` memos aside)."""
    return sum(cache.bytes for cache in list(_bounded))


class LRU(Generic[K, V]):
    """A mapping bounded by entry count (and, with `max_bytes`, by the total `sizeof(key, value)`
    of its entries), least recently used first out; entries idle longer than `ttl_s` expire.
    Safe to share between the event loop and worker threads. An entry larger than `max_bytes`
    alone is not kept, unless `keep_one`: then the most recently used entry stays whatever its size
    (everything else goes), for caches whose miss reloads that very entry (a user's memories, read
    back from the store on every request while it is too big to keep).

    `on_evict(key, value)` is called for entries pushed out by the bound or expired (not for `pop`).
    `max_bytes` is scaled by the process's cache budget (`set_cache_budget`) unless `budgeted` is
    False (per-session state, which is not re-derived once dropped).
    """

    def __init__(
        self,
        max_entries: int,
        ttl_s: float | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        on_evict: Callable[[K, V], None] | None = None,
        max_bytes: int | None = None,
        sizeof: Callable[[K, V], int] | None = None,
        budgeted: bool = True,
        keep_one: bool = False,
    ) -> None:
        if max_entries < 1:
            raise ValueError("an LRU needs room for at least one entry")
        if max_bytes is not None and (max_bytes < 1 or sizeof is None):
            raise ValueError("a byte-bounded LRU needs max_bytes >= 1 and a sizeof(key, value)")
        self.max_entries = max_entries
        self.ttl_s = ttl_s
        self.clock = clock
        self.on_evict = on_evict
        self.own_max_bytes = max_bytes  # its share of the process's cache budget (`set_cache_budget`)
        self.budgeted = budgeted  # False: state, not a cache (what it drops is lost): its own bound only
        self.sizeof = sizeof
        self.keep_one = keep_one
        self.bytes = 0  # the entries' total size (with max_bytes)
        self._items: OrderedDict[K, tuple[V, float]] = OrderedDict()
        self._sizes: dict[K, int] = {}
        self._lock = threading.Lock()
        if max_bytes is not None and budgeted:
            _bounded.add(self)

    @property
    def max_bytes(self) -> int | None:
        """The byte bound now: its own, scaled by the process's cache budget."""
        if self.own_max_bytes is None or not self.budgeted:
            return self.own_max_bytes
        return max(1, int(self.own_max_bytes * _budget["scale"]))

    def fits(self, nbytes: int, share: float = 1.0) -> bool:
        """Whether entries of `nbytes` in all would take at most `share` of the byte bound. A batch
        that would not is better left out: put one by one, it evicts everything other requests reuse
        and then its own first entries (an LRU filled by a scan bigger than itself keeps its tail)."""
        bound = self.max_bytes
        return bound is None or nbytes <= bound * share

    def trim(self) -> None:
        """Evict to stay under the bounds (after the cache budget changed)."""
        with self._lock:
            evicted = self._trim()
        self._report(evicted)

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: K, default: Any = None) -> V | Any:
        """The value for `key` (now the most recently used), or `default` if absent or expired."""
        with self._lock:
            evicted = self._expire() if self.ttl_s is not None else []
            hit = self._items.get(key)
            if hit is not None:
                self._items[key] = (hit[0], self.clock() if self.ttl_s is not None else 0.0)
                self._items.move_to_end(key)
        self._report(evicted)
        return default if hit is None else hit[0]

    def put(self, key: K, value: V) -> None:
        size = self.sizeof(key, value) if self.max_bytes is not None and self.sizeof is not None else 0
        with self._lock:
            self._forget_size(key)
            if self.max_bytes is not None and size > self.max_bytes and not self.keep_one:
                self._items.pop(key, None)  # too big to keep at all
                return
            self._items[key] = (value, self.clock() if self.ttl_s is not None else 0.0)
            self._items.move_to_end(key)
            if size:
                self._sizes[key] = size
                self.bytes += size
            evicted = self._trim()
        self._report(evicted)

    def remeasure(self, key: K) -> None:
        """`key`'s value changed in place (a session's state after its request): size it again and
        evict to stay under the bounds (the value itself too, when it alone is bigger than `max_bytes`)."""
        if self.max_bytes is None or self.sizeof is None:
            return
        with self._lock:
            hit = self._items.get(key)
            if hit is None:
                return
            size = self.sizeof(key, hit[0])
            self._forget_size(key)
            self._sizes[key] = size
            self.bytes += size
            if size > self.max_bytes and not self.keep_one:
                del self._items[key]
                self._forget_size(key)
                evicted = [(key, hit[0])]
            else:
                evicted = self._trim()
        self._report(evicted)

    def get_or_create(self, key: K, factory: Callable[[], V]) -> V:
        """The value for `key`; a fresh one from `factory()` when absent or expired."""
        value = self.get(key, _MISSING)
        if value is _MISSING:
            value = factory()
            self.put(key, value)
        return value

    def items(self) -> list[tuple[K, V]]:
        """The entries, least recently used first (a copy; nothing is touched or expired)."""
        with self._lock:
            return [(key, hit[0]) for key, hit in self._items.items()]

    def pop(self, key: K, default: Any = None) -> V | Any:
        with self._lock:
            hit = self._items.pop(key, None)
            self._forget_size(key)
        return default if hit is None else hit[0]

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._sizes.clear()
            self.bytes = 0

    def _forget_size(self, key: K) -> None:
        size = self._sizes.pop(key, 0) if self._sizes else 0
        self.bytes -= size

    def _expire(self) -> list[tuple[K, V]]:
        """Drop idle entries: they are in last-used order, so the expired ones are at the front."""
        evicted: list[tuple[K, V]] = []
        now = self.clock()
        while self._items:
            key, (value, touched) = next(iter(self._items.items()))
            if now - touched <= self.ttl_s:  # type: ignore[operator]
                break
            del self._items[key]
            self._forget_size(key)
            evicted.append((key, value))
        return evicted

    def _trim(self) -> list[tuple[K, V]]:
        evicted = self._expire() if self.ttl_s is not None else []
        limit = self.max_bytes
        floor = 1 if self.keep_one else 0  # entries the byte bound leaves, at least
        while len(self._items) > self.max_entries or (limit is not None and self.bytes > limit and len(self._items) > floor):
            key, (value, _) = self._items.popitem(last=False)
            self._forget_size(key)
            evicted.append((key, value))
        return evicted

    def _report(self, evicted: list[tuple[K, V]]) -> None:
        if self.on_evict is not None:
            for key, value in evicted:
                self.on_evict(key, value)


SHORT_CACHE_BYTES = 2 * 2**20  # what one `cache_short` memo holds at most, by default (a dozen of them: ~24 MB)


def approx_size(value: Any, depth: int = 2) -> int:
    """Bytes of a value, roughly: sys.getsizeof, one or two levels into tuples, lists, sets and dicts."""
    size = sys.getsizeof(value)
    if depth and isinstance(value, (tuple, list, set, frozenset)):
        size += sum(approx_size(v, depth - 1) for v in value)
    elif depth and isinstance(value, dict):
        size += sum(approx_size(k, depth - 1) + approx_size(v, depth - 1) for k, v in value.items())
    return size


def _entry_size(args: tuple, value: Any) -> int:
    return 100 + sum(approx_size(a) for a in args) + approx_size(value)


def cache_short(maxsize: int, max_chars: int | None = None, *, max_bytes: int = SHORT_CACHE_BYTES,
                sizeof: Callable[[tuple, Any], int] | None = None) -> Callable[[Callable[..., V]], Callable[..., V]]:
    """`functools.lru_cache`, bounded by bytes too, for the calls whose text arguments add up to at
    most `max_chars` characters (None: every call); a longer call (a file written whole as
    arguments, a base64 blob read as one word) is computed each time and not kept: `maxsize` entries
    of megabytes each would hold gigabytes.

    The bytes: each entry kept is sized once, when it is computed (`sizeof(args, value)`; default
    `approx_size` of both), and the sizes are added up; past `max_bytes` the memo is cleared and
    starts again. It holds at most `max_bytes` (plus one entry) whatever its entries weigh, and a hit
    costs what lru_cache's does."""

    def wrap(fn: Callable[..., V]) -> Callable[..., V]:
        held = [0]  # bytes of the entries kept since the last clear (evicted ones too: an upper bound)
        measure = sizeof or _entry_size

        def kept(*args: Any, **kwargs: Any) -> V:  # lru_cache calls it on a miss: the entry it keeps
            value = fn(*args, **kwargs)
            held[0] += measure((*args, *kwargs.values()), value)
            return value

        cached = functools.lru_cache(maxsize=maxsize)(kept)

        def clear() -> None:
            cached.cache_clear()
            held[0] = 0

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> V:
            if max_chars is not None and sum(len(a) for a in (*args, *kwargs.values()) if isinstance(a, str)) > max_chars:
                return fn(*args, **kwargs)
            if held[0] > max_bytes * _budget["scale"]:
                clear()
            return cached(*args, **kwargs)

        call.cache_clear = clear  # type: ignore[attr-defined]
        call.cache_info = cached.cache_info  # type: ignore[attr-defined]
        call.held_bytes = lambda: held[0]  # type: ignore[attr-defined]
        return call

    return wrap
