"""What agents actually use: per tenant, how often a server's sessions called each of its tools.

Users name the goal ("start the car", "rename the report"); agents also call what the goal takes
without anyone saying so (press the brake pedal first, `cd` into the folder, log in). No
description says which tools those are; the traffic does. The policy counts, per tenant, the
sessions in which each tool was called and the sessions in which its server was used, and ranks a
used server's tools up by that share (`usage_boost`). Learned online from the calls the proxy
forwards; nothing is shipped or fitted offline.

Bounded (LRU of counters per tenant and name) and thread-safe. It only moves new selections:
a tool already in a session's list stays where it is.
"""

from __future__ import annotations

import threading
from typing import Iterable

import numpy as np

from ..cache import LRU

MIN_SESSIONS = 3  # a server used in fewer sessions than this says nothing yet
SMOOTHING = 2.0  # shrinks the share of a rarely used server towards 0


class UsageStats:
    def __init__(self, max_entries: int = 100_000) -> None:
        # (tenant, "tool"|"server", name) → sessions. By bytes too: a tool's name is the client's (~250 bytes an entry besides)
        self._counts: LRU[tuple[str, str, str], int] = LRU(max_entries, max_bytes=4 * 2**20, on_evict=self._forget,
                                                           sizeof=lambda key, _: 250 + len(key[0]) + len(key[2]))
        self._lock = threading.Lock()
        self.version = 0  # bumped by every count: derived arrays (a tool set's popularity) are cached against it
        # (tenant, "tool") → the tool names with a count in _counts: a tool set's shares read the few
        # tools counted, not every tool of the set (525 locked reads, ~1.7 ms, after each new call)
        self._named: dict[tuple[str, str], set[str]] = {}
        self._named_lock = threading.Lock()  # taken alone: an eviction may come from any thread

    def count(self, tenant: str | None, tools: Iterable[str], servers: Iterable[str], new_session: bool = False) -> None:
        """One session used these tools (newly) and these servers (newly); `new_session`: its first call."""
        with self._lock:
            self.version += 1
            if new_session:
                key = (tenant or "", "sessions", "")
                self._counts.put(key, self._counts.get(key, 0) + 1)
            for kind, names in (("tool", tools), ("server", servers)):
                for name in names:
                    key = (tenant or "", kind, name)
                    if kind == "tool":
                        with self._named_lock:
                            self._named.setdefault((key[0], kind), set()).add(name)
                    self._counts.put(key, self._counts.get(key, 0) + 1)

    def _forget(self, key: tuple[str, str, str], _: int) -> None:
        with self._named_lock:
            named = self._named.get(key[:2])
            if named is not None:
                named.discard(key[2])
                if not named:
                    del self._named[key[:2]]

    def _counted(self, tenant: str, names: list[str | None]) -> list[tuple[int, int]]:
        """(index in `names`, sessions) of each of the tenant's counted tools in `names`."""
        with self._named_lock:
            counted = list(self._named.get((tenant, "tool"), ()))
        where = dict(zip(names, range(len(names))))  # a name's last index …
        out = []
        for name in counted:
            n = self._counts.get((tenant, "tool", name), 0) if name in where else 0
            if n:
                out.append((where[name], n))
        if len(where) - (None in where) < len(names) - names.count(None):  # … so a repeated name: all of its indices
            repeated = [(i, n) for j, n in out for i, name in enumerate(names) if name == names[j] and i != j]
            out += repeated
        return out

    def popularity(self, tenant: str | None, names: list[str | None]) -> np.ndarray:
        """Per tool: the share of the tenant's sessions (with a call) that called it, 0 before MIN_SESSIONS.
        Some tools serve most tasks whatever they are about (write a file, fetch a page): no task's
        words point to them, the traffic does."""
        out = np.zeros(len(names))
        tenant = tenant or ""
        sessions = self._counts.get((tenant, "sessions", ""), 0)
        if sessions < MIN_SESSIONS:
            return out
        for i, n in self._counted(tenant, names):
            out[i] = n / (sessions + SMOOTHING)
        return out

    def shares(self, tenant: str | None, names: list[str | None], groups: np.ndarray, servers: list[str]) -> np.ndarray:
        """Per tool: the share of its server's sessions that called it (0 without a server or data)."""
        out = np.zeros(len(names))
        tenant = tenant or ""
        used = {}
        for g, server in enumerate(servers):
            n = self._counts.get((tenant, "server", server), 0)
            if n >= MIN_SESSIONS:
                used[g] = n
        if not used:
            return out
        for i, n in self._counted(tenant, names):
            if int(groups[i]) in used:
                out[i] = n / (used[int(groups[i])] + SMOOTHING)
        return out
