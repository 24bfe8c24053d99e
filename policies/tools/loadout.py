"""The session's loadout: the forwarded tool list, append-only within a session.

Providers cache the prompt prefix, and the tool list comes first in it (tools, then the system
prompt, then the messages). A subset that changes from step to step would make every step a
cache miss, however stable the history. So once a tool is forwarded in a session it stays, at its
position; tools a later step needs are appended. The list is rebuilt (evicted) only at a
compaction event (the history policy compacted this request, so the cached prefix is gone anyway)
or when appending would pass `max_forwarded` (what it starts again with: restart.py). Every change is
reported with its reason.

Bounded: one entry per session in an LRU with a TTL, keyed by `Exchange.session_key`; carried
between replicas by a shared state backend (the list stays append-only whichever replica serves).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Hashable, Sequence

from ..state import SessionLRU

# Why the forwarded list changed (reported as tools.list_changed reason=...).
GROW = "grow"  # the ranking of a new step asked for a tool that was missing
CALLED = "called"  # the conversation called (or tool_choice named) a tool that was not forwarded
FOUND = "found"  # the model found it through find_tools
REQUEST = "request"  # stable_list: false, a new user request starts a new list
COMPACTION = "compaction"  # the history was compacted: the cached prefix is gone, start small again
FULL = "full"  # appending would pass max_forwarded: start again from what this step needs
CLIENT = "client"  # the client stopped sending a tool


@dataclass
class Loadout:
    names: list[str] = field(default_factory=list)  # in forwarding order
    request: str = ""  # request_key of the user message the last ranking was made for
    counted: set[str] = field(default_factory=set)  # called tools (and servers) already counted in usage.py


@dataclass(frozen=True)
class ListChange:
    added: tuple[str, ...]
    removed: tuple[str, ...]
    reason: str


def extend(current: Sequence[str], wanted: Sequence[str], available: set[str]) -> tuple[list[str], list[str], list[str]]:
    """(the new list, added, removed): `current` minus what the client no longer sends, then the
    wanted tools it lacks, in the order given."""
    kept = [n for n in current if n in available]
    removed = [n for n in current if n not in available]
    have = set(kept)
    added = []
    for name in wanted:
        if name in available and name not in have:
            have.add(name)
            added.append(name)
    return kept + added, added, removed


def _encode(loadout: Loadout) -> dict[str, Any]:
    return {"names": loadout.names, "request": loadout.request, "counted": sorted(loadout.counted)}


def _decode(doc: dict[str, Any]) -> Loadout:
    return Loadout([str(n) for n in doc["names"]], str(doc["request"]), set(doc["counted"]))


def _merge(base: Loadout | None, mine: Loadout, theirs: Loadout) -> Loadout:
    """Two replicas changed the list at once: theirs' order, then what mine added (not in `base`,
    None: nothing), so the list stays append-only; the newer request key; counted tools of both."""
    before = set(base.names) if base else set()
    have = set(theirs.names)
    added = [n for n in mine.names if n not in before and n not in have]
    request = mine.request if base is None or mine.request != base.request else theirs.request
    return Loadout([*theirs.names, *added], request, theirs.counted | mine.counted)


class Loadouts:
    """Every session's loadout. A lock makes each read-modify-write whole: the search tool
    appends from the event loop while a selection may run in a worker thread."""

    def __init__(self, max_sessions: int, ttl_s: float) -> None:
        self._items: SessionLRU[Loadout] = SessionLRU(max_sessions, ttl_s, encode=_encode, decode=_decode, merge=_merge)
        self.lock = threading.RLock()

    @property
    def states(self) -> SessionLRU[Loadout]:
        return self._items

    def get(self, session: Hashable) -> Loadout | None:
        return self._items.get(session)

    def put(self, session: Hashable, loadout: Loadout) -> None:
        self._items.put(session, loadout)

    def append(self, session: Hashable, names: Sequence[str], available: set[str]) -> list[str]:
        """Add found tools to the session's list; the names actually added, in order."""
        with self.lock:
            loadout = self.get(session) or Loadout()
            loadout.names, added, _ = extend(loadout.names, names, available)
            self.put(session, loadout)
        return added
