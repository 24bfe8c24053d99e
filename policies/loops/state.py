"""Per-session memory of the loops policy, bounded by count (LRU) and idle time (TTL).

Holds what one request cannot see by itself: how many exchanges of a session were refused in a
row (the retry circuit breaker) and which loops already got a system note. Memory is per
process: behind several replicas, route a session to one replica (sticky sessions).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable

MAX_NOTES_PER_SESSION = 16  # loop signatures remembered per session


@dataclass
class SessionState:
    failures: int = 0  # consecutive refused exchanges (rejected/blocked by a policy)
    failure_reasons: list[str] = field(default_factory=list)  # what refused them, oldest first
    failed_turn: str | None = None  # the turn of the last refused exchange
    notes: OrderedDict[str, int] = field(default_factory=OrderedDict)  # loop key → tool rounds when noted
    seen_at: float = 0.0

    def remember_note(self, key: str, tool_rounds: int) -> None:
        self.notes[key] = tool_rounds
        self.notes.move_to_end(key)
        while len(self.notes) > MAX_NOTES_PER_SESSION:
            self.notes.popitem(last=False)

    def reset_failures(self) -> None:
        self.failures = 0
        self.failure_reasons = []
        self.failed_turn = None


class SessionMemory:
    """session id → SessionState; least recently used first, idle entries expire."""

    def __init__(self, max_sessions: int, ttl_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_sessions = max_sessions
        self.ttl_s = ttl_s
        self.clock = clock
        self._states: OrderedDict[str, SessionState] = OrderedDict()

    def __len__(self) -> int:
        return len(self._states)

    def peek(self, session_id: str) -> SessionState | None:
        """The session's state if it is known and fresh (does not create one)."""
        now = self.clock()
        self._expire(now)
        state = self._states.get(session_id)
        if state is not None:
            state.seen_at = now
            self._states.move_to_end(session_id)
        return state

    def get(self, session_id: str) -> SessionState:
        state = self.peek(session_id)
        if state is None:
            state = self._states[session_id] = SessionState(seen_at=self.clock())
            while len(self._states) > self.max_sessions:
                self._states.popitem(last=False)
        return state

    def _expire(self, now: float) -> None:
        # Entries are in last-seen order, so expired ones are at the front.
        while self._states:
            oldest = next(iter(self._states.values()))
            if now - oldest.seen_at <= self.ttl_s:
                break
            self._states.popitem(last=False)
