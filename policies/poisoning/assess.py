"""Assess one text against the knowledge base: claims → evidence → verdicts.

Each sentence of the text is a claim, read as an answer to the user's question. Its evidence is
retrieved with the question plus the claim (evidence.py); the configured checker (checkers/)
gives one verdict per claim. Retrieval is synchronous (embedding, disk): `retrieve` runs in a
worker thread; the checker is awaited (a model-backed one makes its call there).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from ..text.sentences import last_sentence_end, split_sentences
from .checkers.base import CONTRADICTED, CheckContext, Checker, ClaimToCheck, ClaimVerdict
from .kb import KnowledgeBase


@dataclass
class Assessment:
    claims: list[ClaimToCheck] = field(default_factory=list)
    verdicts: list[ClaimVerdict] = field(default_factory=list)
    fresh_share: float = 1.0  # share of retrieved passages that are not stale (always 1: stale ones are skipped)
    events: list[dict] = field(default_factory=list)  # what the checker reported (e.g. a judge fallback)

    @property
    def worst(self) -> ClaimVerdict | None:
        """The contradicted claim the checker is surest of."""
        bad = [v for v in self.verdicts if v.label == CONTRADICTED]
        return max(bad, key=lambda v: v.confidence) if bad else None


def retrieve(text: str, kb: KnowledgeBase, question: str = "", context: str = "", top_k: int = 4) -> list[ClaimToCheck]:
    """The claims of `text` with their evidence (none when the KB is empty)."""
    claims = split_sentences(text)
    if not claims or not len(kb.index):
        return []
    unfinished = context[last_sentence_end(context):].strip()
    if unfinished:  # a streamed sentence released in part: judge it whole
        claims[0] = f"{unfinished} {claims[0]}"
    queries = [f"{question} {c}".strip() for c in claims]
    found = kb.search(queries, k=top_k)
    out: list[ClaimToCheck] = []
    before = context
    for claim, evidence in zip(claims, found):
        out.append(ClaimToCheck(claim, question, tuple(evidence), before[-500:]))
        before = f"{before} {claim}".strip()
    return out


async def assess(claims: Sequence[ClaimToCheck], checker: Checker, exchange: object = None) -> Assessment:
    if not claims:
        return Assessment()
    ctx = CheckContext(exchange=exchange)
    verdicts = await checker.check(list(claims), ctx)
    return Assessment(list(claims), verdicts, 1.0, ctx.events)
