"""An in-memory view of the knowledge base's passages, analysed once when they are loaded.

Chroma holds the passages and their vectors (the source of truth, persistent, shared between
replicas with `storage.chroma_url`); this index keeps what the local checker needs at hand for
each passage — its mentions and facts — plus lookups by subject and a lexicon of the names the
KB knows, so that checking a claim costs dictionary lookups instead of re-reading passages.
"""

from __future__ import annotations

import difflib
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any, Iterable

from ..text.claims import STOP, Mention, find_mentions
from ..text.relations import Fact, extract_facts


@dataclass
class Passage:
    id: str  # "<document id>#<n>"
    doc_id: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)
    mentions: list[Mention] = field(default_factory=list)
    facts: list[Fact] = field(default_factory=list)

    @property
    def stale(self) -> bool:
        return is_stale(self.metadata)

    @classmethod
    def analysed(cls, id: str, doc_id: str, text: str, metadata: dict[str, Any] | None = None) -> "Passage":
        mentions = find_mentions(text)
        return cls(id, doc_id, text, dict(metadata or {}), mentions, extract_facts(text, mentions))


class KnowledgeIndex:
    def __init__(self) -> None:
        self.passages: dict[str, Passage] = {}
        self._facts: dict[str, list[tuple[Fact, str]]] = defaultdict(list)  # subject key → (fact, passage id)
        self._subject_tokens: dict[str, set[str]] = defaultdict(set)  # token → subject keys (fuzzy lookup)
        self._by_name: dict[str, set[str]] = defaultdict(set)  # name key → passage ids mentioning it
        self._name_tokens: dict[str, set[str]] = defaultdict(set)  # token → name keys (fuzzy lookup of any name)
        self._by_doc: dict[str, set[str]] = defaultdict(set)  # document id → its passage ids
        self._lexicon_counts: dict[str, int] = defaultdict(int)
        self.lexicon: dict[str, str] = {}  # name key → itself; known names found case-insensitively in claims

    def __len__(self) -> int:
        return len(self.passages)

    def add(self, passages: Iterable[Passage]) -> None:
        for p in passages:
            if p.id in self.passages:
                self.remove([p.id])
            self.passages[p.id] = p
            self._by_doc[p.doc_id].add(p.id)
            for fact in p.facts:
                self._facts[fact.subject.key].append((fact, p.id))
                for token in fact.subject.key.split():
                    self._subject_tokens[token].add(fact.subject.key)
            for m in p.mentions:
                if m.kind == "name" and m.key not in STOP:
                    self._by_name[m.key].add(p.id)
                    self._lexicon_counts[m.key] += 1
                    self.lexicon[m.key] = m.key
                    for token in m.key.split():
                        self._name_tokens[token].add(m.key)

    def remove(self, passage_ids: Iterable[str]) -> None:
        for pid in passage_ids:
            p = self.passages.pop(pid, None)
            if p is None:
                continue
            self._by_doc[p.doc_id].discard(pid)
            if not self._by_doc[p.doc_id]:
                self._by_doc.pop(p.doc_id)
            for fact in p.facts:
                entries = [e for e in self._facts.get(fact.subject.key, []) if e[1] != pid]
                if entries:
                    self._facts[fact.subject.key] = entries
                else:
                    self._facts.pop(fact.subject.key, None)
                    for token in fact.subject.key.split():
                        self._subject_tokens[token].discard(fact.subject.key)
            for m in p.mentions:
                self._by_name.get(m.key, set()).discard(pid)
                if m.kind == "name" and m.key in self._lexicon_counts:
                    self._lexicon_counts[m.key] -= 1
                    if self._lexicon_counts[m.key] <= 0:
                        self._lexicon_counts.pop(m.key)
                        self.lexicon.pop(m.key, None)
                        for token in m.key.split():
                            self._name_tokens[token].discard(m.key)

    def passages_with(self, key: str, limit: int = 50) -> list[Passage]:
        """Passages that mention the name `key` (none for names so common they say nothing)."""
        ids = self._by_name.get(key, set())
        return [self.passages[pid] for pid in ids] if len(ids) <= limit else []

    def passages_naming(self, key: str, limit: int = 50) -> list[tuple[Passage, float]]:
        """Fresh passages that name `key` or a close variant ("Bloom" → "Orlando Bloom"), with how
        well the names match; none for a name so common that it says nothing (> `limit` passages)."""
        exact = self._by_name.get(key)
        keys = {key: 1.0} if exact else {k: name_match(key, k) for k in self._similar_names(key)}
        out: dict[str, tuple[Passage, float]] = {}
        for k, score in keys.items():
            ids = self._by_name.get(k, set())
            if not score or len(ids) > limit:
                continue
            for pid in ids:
                if pid not in out or out[pid][1] < score:
                    out[pid] = (self.passages[pid], score)
        return [entry for entry in out.values() if not entry[0].stale]

    def document_passages(self, doc_id: str) -> list[Passage]:
        return [self.passages[pid] for pid in self._by_doc.get(doc_id, ())]

    def is_subject(self, key: str) -> bool:
        """Does the KB state facts about `key` (not only mention it)?"""
        return key in self._facts

    def _similar_names(self, key: str) -> set[str]:
        tokens = [t for t in key.split() if t not in STOP and len(t) > 2]
        candidates: set[str] = set()
        for t in tokens:
            keys = self._name_tokens.get(t, set())
            if len(keys) <= 50:
                candidates |= keys
        return {k for k in candidates if name_match(key, k) >= 0.85}

    def facts_about(self, subject: Mention) -> list[tuple[Fact, Passage, float]]:
        """Facts whose subject is `subject`, with how well the names match (1.0 exact)."""
        out = [(f, self.passages[pid], 1.0) for f, pid in self._facts.get(subject.key, [])]
        if not out and subject.kind == "name":
            for key in self._similar_subjects(subject.key):
                score = name_match(subject.key, key)
                out += [(f, self.passages[pid], score) for f, pid in self._facts.get(key, [])]
        return [entry for entry in out if not entry[1].stale]

    def _similar_subjects(self, key: str) -> set[str]:
        tokens = [t for t in key.split() if t not in STOP and len(t) > 2]
        candidates: set[str] = set()
        for t in tokens:
            keys = self._subject_tokens.get(t, set())
            if len(keys) <= 50:  # a common token ("love", "story") says nothing about the subject
                candidates |= keys
        return {k for k in candidates if name_match(key, k) >= 0.85}


@lru_cache(maxsize=200_000)
def name_match(a: str, b: str) -> float:
    """1.0 same key; 0.9 one name contained in the other ("Bloom" in "Orlando Bloom");
    else the similarity ratio when it is high (typos: "Revoloution"), else 0."""
    if a == b:
        return 1.0
    ta, tb = a.split(), b.split()
    short, long = (ta, tb) if len(ta) <= len(tb) else (tb, ta)
    if short and (long[: len(short)] == short or long[-len(short):] == short):
        if any(len(t) > 2 and t not in STOP for t in short):
            return 0.9
    matcher = difflib.SequenceMatcher(None, a, b)
    if matcher.real_quick_ratio() < 0.85 or matcher.quick_ratio() < 0.85:  # cheap upper bounds first
        return 0.0
    ratio = matcher.ratio()
    return ratio if ratio >= 0.85 else 0.0


def same_value(a: Mention, b: Mention) -> bool:
    """Does the claim's value `a` agree with the KB's value `b`?"""
    if a.kind in ("number", "date") or b.kind in ("number", "date"):
        return _same_quantity(a, b)
    return name_match(a.key, b.key) > 0


def _same_quantity(a: Mention, b: Mention) -> bool:
    if a.kind == "date" and b.kind == "date":
        return a.key.startswith(b.key) or b.key.startswith(a.key)
    try:
        x, y = float(a.key.rstrip("%")), float(b.key.rstrip("%"))
    except ValueError:
        return a.key == b.key
    return abs(x - y) <= 0.05 * max(abs(x), abs(y), 1e-9)  # "2.1 million" and "2,148,000" agree


def is_stale(metadata: dict[str, Any], now: datetime | None = None) -> bool:
    """A passage whose `valid_until` (ISO date) has passed is stale: kept, listed, never used to judge."""
    until = metadata.get("valid_until")
    if not isinstance(until, str):
        return False
    try:
        moment = datetime.fromisoformat(until.replace("Z", "+00:00"))
    except ValueError:
        return False
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment < (now or datetime.now(timezone.utc))
