"""What the clash policy remembers per session: decisions, questions asked, judge findings.

Decisions make resolution stable: once a clash is resolved, every later turn applies the same
resolution to the same messages, so the forwarded prefix stays byte-identical (provider prompt
caches keep working) and metrics count each clash once. In-process and bounded (LRU + TTL); the
local detector and the question texts are deterministic, so a restart or another replica
re-derives the same resolutions from the conversation itself.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Literal

Winner = Literal["newer", "older", "both", "ask"]


@dataclass(frozen=True)
class Decision:
    winner: Winner  # which statement stays live ("both": neither is edited)
    how: str  # prefer_recent | merge | keep_existing | user | unordered | unclear | ask_user


@dataclass
class SessionState:
    decisions: dict[str, Decision] = field(default_factory=dict)  # clash key → decision
    asked: set[str] = field(default_factory=set)  # clash keys a question was sent for
    seen_duplicates: set[str] = field(default_factory=set)
    judged: set[str] = field(default_factory=set)  # user-message text hashes the judge has seen
    judge_findings: list[dict[str, Any]] = field(default_factory=list)
    touched: float = field(default_factory=time.monotonic)


class SessionMemory:
    def __init__(self, max_sessions: int, ttl_s: float) -> None:
        self.max_sessions = max_sessions
        self.ttl_s = ttl_s
        self._sessions: OrderedDict[str, SessionState] = OrderedDict()

    def get(self, session_id: str) -> SessionState:
        now = time.monotonic()
        state = self._sessions.get(session_id)
        if state is None or now - state.touched > self.ttl_s:
            state = SessionState()
        state.touched = now
        self._sessions[session_id] = state
        self._sessions.move_to_end(session_id)
        while len(self._sessions) > self.max_sessions:
            self._sessions.popitem(last=False)
        return state

    def __len__(self) -> int:
        return len(self._sessions)
