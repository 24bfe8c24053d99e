"""WRITE: turn a user's text into stored memories — extract, gate, compare, store.

Synchronous (Chroma and the embedder block): the policy runs it in a worker thread, and awaits it,
so the request that wrote a memory reports it and the next request finds it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import numpy as np

from ..text.statements.match import Matcher
from .extract import Candidate
from .hints import Owner
from .model import Memory, memory_id
from .store import MemoryStore
from .supersede import compare

COMPARED = 32  # the nearest live memories a new one is compared with (contradictions are about the same thing)


@dataclass
class WriteReport:
    written: list[Memory] = field(default_factory=list)
    merged: list[Memory] = field(default_factory=list)
    superseded: list[tuple[Memory, Memory]] = field(default_factory=list)  # (older, newer)
    unsettled: list[tuple[Memory, Memory]] = field(default_factory=list)  # ask_user: (older, newer), both live


@dataclass(frozen=True)
class Provenance:
    session: str = ""
    message_hash: str = ""
    source: str = "conversation"


def write(store: MemoryStore, owner: Owner, found: list[Candidate], strategy: str, origin: Provenance,
          matcher: Matcher | None = None, kind: str | None = None, context: str = "",
          context_weight: float = 0.0) -> WriteReport:
    """Store `found`; each new memory's vector is its sentence read with `context`, the turn it came
    from, weighted `context_weight` (in_context; "" or 0: the sentence alone)."""
    report = WriteReport()
    index = store.index(owner.tenant, owner.user)
    turn: list[np.ndarray] = []  # the context's vector, embedded once, when a memory is new
    for candidate in found:
        now = time.time()
        mid = memory_id(owner.tenant, owner.user, owner.task, owner.scope, candidate.text)
        existing = index.get(mid)
        if existing is not None and existing.live:
            merged = replace(existing, updated_at=now)
            store.update(merged)
            report.merged.append(merged)
            continue
        sentence = vector = store.embed([candidate.text])[0]
        if context_weight > 0 and context.strip() and " ".join(context.split()) != candidate.text:
            turn = turn or [store.embed([context])[0]]
            vector = in_context(sentence, turn[0], context_weight)
        # what it may contradict or repeat is found by what the sentence says, not by its turn's topic
        seen = compare(candidate.statements, index.nearest_live(sentence, owner.task, COMPARED), matcher)
        if seen.duplicate_of is not None and not seen.contradicted:
            merged = replace(seen.duplicate_of, updated_at=now)
            store.update(merged)
            report.merged.append(merged)
            continue
        memory = Memory(id=mid, text=candidate.text, kind=kind or candidate.kind, scope=owner.scope, user=owner.user,
                        task="" if owner.scope == "shared" else owner.task, tenant=owner.tenant, created_at=now,
                        session=origin.session, message_hash=origin.message_hash, source=origin.source,
                        quality=round(candidate.quality, 3), slots=candidate.slots)
        if strategy == "keep_existing" and seen.contradicted:
            older = seen.contradicted[0]
            memory = replace(memory, superseded_by=older.id, reason=f"keep_existing: contradicts {older.id}")
        store.put(memory, vector)
        report.written.append(memory)
        for older in seen.contradicted if memory.live else ():
            if strategy == "ask_user":
                report.unsettled.append((older, memory))
                continue
            store.update(replace(older, superseded_by=memory.id, reason=f"{strategy}: contradicted by a newer memory"))
            report.superseded.append((older, memory))
    return report


def in_context(sentence: np.ndarray, turn: np.ndarray, weight: float) -> np.ndarray:
    """A memory's vector read with the turn it came from: unit(sentence + weight * turn). A sentence
    of a narrative turn says little alone ("No meat, no dairy, no eggs, no animal products.", "It's
    not the location — it's the motivation."); the turn names what it is about ("I've decided to go
    fully vegan", "remote work"). config.context_weight; README, memory."""
    mixed = np.asarray(sentence, dtype=np.float32) + weight * np.asarray(turn, dtype=np.float32)
    norm = float(np.linalg.norm(mixed))
    return mixed / norm if norm > 0 else np.asarray(sentence, dtype=np.float32)


def settle(store: MemoryStore, owner: Owner, loser: str, winner: str) -> Memory | None:
    """The user chose (ask_user): `loser` is superseded by `winner`; None when either is gone or
    no longer live (deleted or settled since the question)."""
    index = store.index(owner.tenant, owner.user)
    older, newer = index.get(loser), index.get(winner)
    if older is None or newer is None or not older.live or not newer.live:
        return None
    gone = replace(older, superseded_by=newer.id, reason="user: chose the other memory when asked")
    store.update(gone)
    return gone
