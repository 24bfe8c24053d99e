"""What the loops policy remembers per session (held in a bounded LRU with a TTL by the policy).

Holds what one request cannot see by itself: how many exchanges of a session were refused in a
row (the retry circuit breaker) and which loops already got a system note. With a shared state
backend (`state.redis_url`) it travels between replicas as the document `encode` makes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..cache import LRU

MAX_NOTES_PER_SESSION = 16  # loop signatures remembered per session
MERGED_REASONS = 10  # refusal reasons a merge keeps (as the policy does: policy.MAX_REASONS)


@dataclass
class SessionState:
    failures: int = 0  # consecutive refused exchanges (rejected/blocked by a policy)
    failure_reasons: list[str] = field(default_factory=list)  # what refused them, oldest first
    failed_turn: str | None = None  # the turn of the last refused exchange
    notes: LRU[str, int] = field(default_factory=lambda: LRU(MAX_NOTES_PER_SESSION))  # loop key → tool rounds when noted

    def remember_note(self, key: str, tool_rounds: int) -> None:
        self.notes.put(key, tool_rounds)

    def reset_failures(self) -> None:
        self.failures = 0
        self.failure_reasons = []
        self.failed_turn = None


def encode(state: SessionState) -> dict[str, Any]:
    return {"failures": state.failures, "reasons": state.failure_reasons, "turn": state.failed_turn,
            "notes": [[key, rounds] for key, rounds in state.notes.items()]}


def decode(doc: dict[str, Any]) -> SessionState:
    state = SessionState(int(doc["failures"]), [str(r) for r in doc["reasons"]], doc["turn"])
    for key, rounds in doc["notes"]:
        state.notes.put(str(key), int(rounds))
    return state


def merge_state(base: SessionState | None, mine: SessionState, theirs: SessionState) -> SessionState:
    """Two replicas changed the session at once: the refusal counter adds both changes (theirs +
    mine − base, so no increment is lost), reasons keep theirs then those mine added, and the
    loop notes are the union. `base` None (unknown): the empty state."""
    base = base or SessionState()
    failures = max(0, theirs.failures + mine.failures - base.failures)
    kept = len(base.failure_reasons)
    grew = mine.failure_reasons[:kept] == base.failure_reasons and mine.failures >= base.failures
    added = mine.failure_reasons[kept:] if grew else mine.failure_reasons  # after a reset: all of mine
    reasons = [*theirs.failure_reasons, *added][-min(failures, MERGED_REASONS):] if failures else []
    turn = mine.failed_turn if mine.failed_turn != base.failed_turn else theirs.failed_turn
    merged = SessionState(failures, reasons, turn if failures else None)
    for key, rounds in theirs.notes.items():
        merged.notes.put(key, rounds)
    for key, rounds in mine.notes.items():
        merged.notes.put(key, max(rounds, merged.notes.get(key, rounds)))
    return merged
