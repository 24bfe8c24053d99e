"""What the clash policy remembers per session: decisions, questions asked, judge findings.

Decisions make resolution stable: once a clash is resolved, every later turn applies the same
resolution to the same messages, so the forwarded prefix stays byte-identical (provider prompt
caches keep working) and metrics count each clash once. Held in-process in a bounded LRU with a TTL, and carried between replicas as the document `encode`
makes when a shared state backend is configured (a question answered on one replica is applied by
the next); the local detector and the question texts are deterministic, so a restart re-derives
the same resolutions from the conversation itself.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Literal

Winner = Literal["newer", "older", "both", "ask"]


@dataclass(frozen=True)
class Decision:
    winner: Winner  # which statement stays live ("both": neither is edited)
    how: str  # prefer_recent | merge | keep_existing | correction | user | unordered | unclear | ask_user


@dataclass
class SessionState:
    decisions: dict[str, Decision] = field(default_factory=dict)  # clash key → decision
    asked: set[str] = field(default_factory=set)  # clash keys a question was sent for
    seen_duplicates: set[str] = field(default_factory=set)
    seen_weak: set[str] = field(default_factory=set)  # clash keys reported as weak (evidence.py), once each
    judged: set[str] = field(default_factory=set)  # user-message text hashes the judge has seen
    judge_findings: list[dict[str, Any]] = field(default_factory=list)
    # the `note` strategy: user text key → the notes appended to that message, in the order first given
    notes: dict[str, list[str]] = field(default_factory=dict)
    touched: float = field(default_factory=time.monotonic)


def encode(state: SessionState) -> dict[str, Any]:
    return {"decisions": {key: [d.winner, d.how] for key, d in state.decisions.items()},
            "asked": sorted(state.asked), "duplicates": sorted(state.seen_duplicates), "weak": sorted(state.seen_weak),
            "judged": sorted(state.judged), "findings": state.judge_findings, "notes": state.notes}


def decode(doc: dict[str, Any]) -> SessionState:
    return SessionState(
        decisions={str(key): Decision(winner, how) for key, (winner, how) in doc["decisions"].items()},
        asked=set(doc["asked"]), seen_duplicates=set(doc["duplicates"]), judged=set(doc["judged"]),
        seen_weak=set(doc.get("weak", ())),
        judge_findings=list(doc["findings"]), notes={str(k): list(v) for k, v in doc.get("notes", {}).items()},
    )


def merge_state(base: SessionState | None, mine: SessionState, theirs: SessionState) -> SessionState:
    """Two replicas changed the session at once: a clash both decided keeps theirs (the first
    writer's decision is frozen), the rest is the union; judge findings keep theirs first."""
    findings = [*theirs.judge_findings, *(f for f in mine.judge_findings if f not in theirs.judge_findings)]
    return SessionState(
        decisions={**mine.decisions, **theirs.decisions}, asked=theirs.asked | mine.asked,
        seen_duplicates=theirs.seen_duplicates | mine.seen_duplicates, judged=theirs.judged | mine.judged,
        seen_weak=theirs.seen_weak | mine.seen_weak,
        judge_findings=findings, touched=max(theirs.touched, mine.touched),
        notes={**mine.notes, **theirs.notes},  # a message's notes as first written (theirs) stay byte for byte
    )
