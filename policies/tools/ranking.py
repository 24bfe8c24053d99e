"""Hybrid relevance of a request's tools to its intent: embeddings plus BM25.

    relevance = (w_doc·cos(query, definition) + w_seg·max cos(query, segment)) / (w_doc + w_seg)
                + w_lex · bm25 / (bm25 + 3)

The cosine terms come from the catalog's vectors; BM25 is computed over the request's own tools
(IDF from that set), and its saturating transform keeps the score absolute, so `min_score` means
the same thing for every request. A `ToolSetIndex` holds everything that depends only on the tool
set, so a repeated tool set costs one matrix product and a few dictionary lookups.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from ..cache import LRU
from .catalog import ToolVectors
from .servers import server_groups
from .text import ToolText, terms

_UNSEEN: Any = object()  # a term not looked up yet (None caches a term no tool has)

BM25_K1 = 1.2
BM25_B = 0.75
LEXICAL_HALF = 3.0  # the BM25 score that counts as half a lexical match


@dataclass(frozen=True)
class Weights:
    description: float = 1.0
    segments: float = 0.5
    lexical: float = 0.1


@dataclass(frozen=True)
class LexicalDoc:
    """A tool's lexical terms with their counts (computed once per distinct definition)."""

    counts: dict[str, int]
    length: int

    @classmethod
    def of(cls, text: ToolText) -> "LexicalDoc":
        counts = Counter(terms(text.lexical))
        return cls(dict(counts), sum(counts.values()))


def _posting_size(term: str, posting: tuple[np.ndarray, np.ndarray] | None) -> int:
    return 100 + len(term) + (posting[0].nbytes + posting[1].nbytes if posting is not None else 0)


class LexicalIndex:
    """BM25 over one tool set, IDF from that set. Built once per tool set: every term's hits (tool,
    count) are gathered up front, so a query's new term costs a lookup, not a scan of the set (a
    new task's words are mostly new terms); its weighted posting is made on first use and kept."""

    MAX_QUERY_TERMS = 64
    MAX_CACHED_TERMS = 20_000
    MAX_POSTING_BYTES = 2**20  # per tool set: a term's posting is 16 bytes a tool that uses it

    def __init__(self, docs: Sequence[LexicalDoc]) -> None:
        self.docs = list(docs)
        total = sum(d.length for d in self.docs)
        avg = total / len(self.docs) if total else 1.0
        self.norms = [BM25_K1 * (1 - BM25_B + BM25_B * d.length / avg) for d in self.docs]
        self._hits: dict[str, list[tuple[int, int]]] = {}
        for i, d in enumerate(self.docs):
            for term, tf in d.counts.items():
                self._hits.setdefault(term, []).append((i, tf))
        # ~70 bytes a (term, tool) pair, ~60 a distinct term besides its characters
        self.hits_nbytes = 70 * sum(len(d.counts) for d in self.docs) + sum(60 + len(t) for t in self._hits)
        self._postings: LRU[str, tuple[np.ndarray, np.ndarray] | None] = LRU(
            self.MAX_CACHED_TERMS, max_bytes=self.MAX_POSTING_BYTES, sizeof=_posting_size)

    def scores(self, query_terms: Sequence[str] | Mapping[str, float]) -> np.ndarray:
        """BM25 of every tool; with a mapping, each term's contribution is scaled by its weight."""
        weighted = query_terms if isinstance(query_terms, Mapping) else dict.fromkeys(query_terms, 1.0)
        if len(weighted) > self.MAX_QUERY_TERMS:  # the heaviest terms (stable: first seen first among equals)
            weighted = dict(sorted(weighted.items(), key=lambda kv: -kv[1])[: self.MAX_QUERY_TERMS])
        out = np.zeros(len(self.docs))
        for term, weight in weighted.items():
            if term not in self._hits:
                continue
            hit = self._postings.get(term, _UNSEEN)
            if hit is _UNSEEN:
                hit = self._posting(term)
            if hit is not None:
                out[hit[0]] += weight * hit[1]
        return out

    def _posting(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        hits = self._hits.get(term)
        posting = None
        if hits:
            n = len(self.docs)
            idf = math.log(1 + (n - len(hits) + 0.5) / (len(hits) + 0.5))
            posting = (
                np.array([i for i, _ in hits]),
                np.array([idf * tf * (BM25_K1 + 1) / (tf + self.norms[i]) for i, tf in hits]),
            )
        self._postings.put(term, posting)
        return posting


@dataclass
class ToolSetIndex:
    """One request tool set, ready to score: stacked vectors and the lexical postings."""

    names: list[str | None]
    lexical: LexicalIndex
    documents: np.ndarray | None  # (n, dim); None when embeddings were unavailable (lexical only)
    segments: np.ndarray | None  # (total segments, dim)
    segment_starts: np.ndarray | None  # first segment row of each tool (tools own contiguous rows)
    groups: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # server per tool (servers.py)
    servers: list[str] = field(default_factory=list)  # server names, by group index
    token_counts: dict[str, np.ndarray] = field(default_factory=dict)  # model → tokens per tool
    facts: list[Any] = field(default_factory=list)  # the tools' ToolFacts (facts.py), same order
    positions: dict[str, int] = field(default_factory=dict)  # name → index of its first tool
    derived: dict[str, Any] = field(default_factory=dict)  # arrays computed from it and kept (policy.py)

    @classmethod
    def build(cls, names: list[str | None], docs: Sequence[LexicalDoc],
              vectors: Sequence[ToolVectors] | None) -> "ToolSetIndex":
        lexical = LexicalIndex(docs)
        groups, servers = server_groups(names)
        positions: dict[str, int] = {}
        for i, name in enumerate(names):
            if name is not None:
                positions.setdefault(name, i)
        if not vectors:
            return cls(names, lexical, None, None, None, groups, servers, positions=positions)
        documents = np.stack([v.vectors[0] for v in vectors])
        segments = np.concatenate([v.vectors[1:] for v in vectors])
        counts = np.array([len(v.vectors) - 1 for v in vectors])
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        return cls(names, lexical, documents, segments, starts, groups, servers, positions=positions)

    @property
    def has_vectors(self) -> bool:
        return self.documents is not None

    @property
    def nbytes(self) -> int:
        """About: the vectors, the tools' facts (texts and term counts: ~4 KB a real MCP tool, ~33 KB a
        fuzzed one of 2 KB random words; counted at 2 KB a tool, two such 600-tool indexes held 41 MB
        where 12 were counted), ~300 bytes a tool of lists, the terms' hits and the postings' bound."""
        arrays = sum(a.nbytes for a in (self.documents, self.segments) if a is not None)
        facts = sum(f.nbytes for f in self.facts)  # kept alive here whatever the facts cache evicts
        return arrays + 300 * len(self.names) + facts + self.lexical.hits_nbytes + LexicalIndex.MAX_POSTING_BYTES

    def relevance(self, query_vector: np.ndarray | None, query_terms: Sequence[str] | Mapping[str, float],
                  weights: Weights) -> np.ndarray:
        bm25 = self.lexical.scores(query_terms)
        lexical = bm25 / (bm25 + LEXICAL_HALF)
        if query_vector is None or self.documents is None:
            return lexical
        semantic = weights.description * _matvec(self.documents, query_vector)
        if weights.segments:
            best_segment = np.maximum.reduceat(_matvec(self.segments, query_vector), self.segment_starts)
            semantic = semantic + weights.segments * best_segment
        return semantic / (weights.description + weights.segments) + weights.lexical * lexical


def _matvec(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """matrix @ vector on this thread. `@` goes to BLAS, whose worker threads sleep between requests:
    waking them cost ~8 ms a request on a busy 2-core host (measured), for ~0.3 ms of work here."""
    return np.einsum("ij,j->i", matrix, vector)
