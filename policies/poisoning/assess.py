"""Assess one text against the knowledge base: claims → evidence → verdicts.

Each sentence of the text is a claim, read as an answer to the user's question. Its evidence is
retrieved with the question plus the claim (evidence.py); the configured checker (checkers/)
gives one verdict per claim. Retrieval is synchronous (embedding, disk): `retrieve` runs in a
worker thread; the checker is awaited (a model-backed one makes its call there).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from ..text.sentences import bounded_sentences, last_sentence_end
from ..text.slots import FUNCTION_WORDS, fold, words
from .checkers.base import CONTRADICTED, CheckContext, Checker, ClaimToCheck, ClaimVerdict
from .kb import KnowledgeBase

# A claim longer than this (a log line, a JSON tool result with no sentence end) is judged in
# pieces: natural sentences are far shorter, and long ones cost every check in proportion to their square.
MAX_CLAIM_CHARS = 500


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


def retrieve(text: str, kb: KnowledgeBase, question: str = "", context: str = "", top_k: int = 4,
             claims: list[str] | None = None) -> list[ClaimToCheck]:
    """The claims of `text` (or the `claims` given) with their evidence (none when the KB is empty)."""
    if not len(kb.index):  # nothing to judge by: not even the split (a 16 MB text was ~1 s of it)
        return []
    claims = bounded_sentences(text, MAX_CLAIM_CHARS) if claims is None else list(claims)
    if not claims:
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


@dataclass
class InputClaims:
    """What of an incoming message is worth judging against the KB."""

    claims: list[str]
    unrelated: int = 0  # pieces sharing no word with the KB: nothing there for it to contradict
    over_cap: int = 0  # related pieces past the per-message cap, least related first


def input_claims(text: str, kb: KnowledgeBase, cap: int) -> InputClaims:
    """The pieces of a tool result (or an earlier answer) that the KB can speak to: those sharing a
    content word with it, most shared first, at most `cap`. A 4k-token log or JSON result is
    hundreds of pieces, and judging each costs a retrieval and a verdict; the KB has nothing to say
    about pieces that share no word with it (every checker needs evidence, and evidence is found by
    the words it shares or by meaning, which a piece of records and ids rarely has in common)."""
    vocabulary = kb.index.vocabulary
    if not vocabulary:  # an empty KB speaks to nothing: no need to split (~2 ms for an agent's 8 KB tool result)
        return InputClaims([])
    pieces = bounded_sentences(text, MAX_CLAIM_CHARS)
    related = []  # (words shared with the KB, position, piece)
    for n, piece in enumerate(pieces):
        shared = len({w for w in words(fold(piece)) if w not in FUNCTION_WORDS and not w.isdigit()} & vocabulary)
        if shared:
            related.append((shared, n, piece))
    kept = sorted(sorted(related, key=lambda r: -r[0])[:cap], key=lambda r: r[1])  # the most related, in text order
    return InputClaims([piece for _, _, piece in kept], len(pieces) - len(related), len(related) - len(kept))


def input_evidence(text: str, kb: KnowledgeBase, cap: int, top_k: int) -> tuple[InputClaims, list[ClaimToCheck]]:
    """The pieces of an incoming message worth judging, with their evidence: one call, off the loop."""
    pieces = input_claims(text, kb, cap)
    return pieces, retrieve(text, kb, top_k=top_k, claims=pieces.claims)


async def assess(claims: Sequence[ClaimToCheck], checker: Checker, exchange: object = None) -> Assessment:
    if not claims:
        return Assessment()
    ctx = CheckContext(exchange=exchange)
    verdicts = await checker.check(list(claims), ctx)
    return Assessment(list(claims), verdicts, 1.0, ctx.events)
