"""Assess one text against the knowledge base: claims → checks (local, then the judge if asked).

`assess_local` is synchronous and CPU/disk-bound (run it in a worker thread); `apply_judge`
is the async second pass that sends the claims the local checker was unsure of (or all of
them) to the LLM judge, keeping the local verdict for any claim the judge fails on.
With a `Grounder` (grounding mode), a claim the local checker does not contradict more surely
may come out UNSUPPORTED instead (grounding.py).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..text.claims import Claim, split_claims
from .check import CONTRADICTED, UNSUPPORTED, UNVERIFIABLE, ClaimCheck, LLMJudge, LocalChecker
from .grounding import Conversation, Grounder
from .kb import KnowledgeBase
from .kb_index import Passage

log = logging.getLogger("ctxwarden.poisoning")


@dataclass
class Assessment:
    claims: int = 0  # all claims in the text
    checks: list[ClaimCheck] = field(default_factory=list)  # one per checkable claim
    evidence: list[list[Passage]] = field(default_factory=list)  # passages each check could use
    targets: list[Claim] = field(default_factory=list)
    closeness: list[float] = field(default_factory=list)  # similarity of each claim's nearest passage
    fresh_share: float = 1.0  # share of the nearest passages that are not stale
    judged: int = 0
    judge_errors: int = 0

    @property
    def worst(self) -> ClaimCheck | None:
        """The contradicted (or, grounding, unsupported) claim the checker is surest of."""
        bad = [c for c in self.checks if c.verdict in (CONTRADICTED, UNSUPPORTED)]
        return max(bad, key=lambda c: c.confidence) if bad else None


def assess_local(text: str, kb: KnowledgeBase, checker: LocalChecker, context: str = "", top_k: int = 4,
                 conversation: Sequence[str] = (), grounder: Grounder | None = None) -> Assessment:
    """`conversation`: the texts of the messages before the answer (the last one resolves "she" in
    a first claim; with a grounder, all of them ground what they mention)."""
    index = kb.index
    claims = split_claims(text, index.lexicon, context, conversation[-1] if conversation else "")
    targets = [c for c in claims if c.checkable]
    if not targets or not len(index):
        return Assessment(claims=len(claims))
    neighbours = kb.nearest([c.text for c in targets], k=top_k)
    checks = [checker.check(c, index, n) for c, n in zip(targets, neighbours)]
    if grounder is not None:
        said = Conversation.of(conversation)
        checks = [_grounded(check, grounder.check(c, index, said, near)) for c, check, near in zip(targets, checks, neighbours)]
    evidence = [_evidence(check, near, index.passages) for check, near in zip(checks, neighbours)]
    close = [p for near in neighbours for p, sim in near if sim >= checker.similarity_floor]
    fresh = sum(1 for p in close if not p.stale) / len(close) if close else 1.0
    closeness = [max((sim for _, sim in near), default=0.0) for near in neighbours]
    return Assessment(len(claims), checks, evidence, targets, closeness, fresh)


def _grounded(check: ClaimCheck, grounding: ClaimCheck | None) -> ClaimCheck:
    """The surer of the two; a contradiction names the KB fact that refutes the claim, so it stays
    unless the grounding is clearly surer."""
    if grounding is None or (check.verdict == CONTRADICTED and check.confidence >= grounding.confidence - 0.05):
        return check
    return grounding


def _evidence(check: ClaimCheck, near: Sequence[tuple[Passage, float]], passages: dict[str, Passage]) -> list[Passage]:
    out = [passages[check.evidence_id]] if check.evidence_id in passages else []
    out += [p for p, sim in near if sim >= 0.5 and not p.stale and p not in out]
    return out[:5]


async def apply_judge(assessment: Assessment, judge: LLMJudge, when: str, threshold: float,
                      similarity_floor: float, exchange: Any = None) -> None:
    """Replace local verdicts by the judge's. `unsure`: contradictions (and unsupported claims)
    below the threshold, and claims the local checker could not decide although a passage is close
    (similarity ≥ its floor); `always`: every claim with KB evidence. A failing judge leaves the
    local verdict, and so does a judge that finds an unsupported claim UNVERIFIABLE (the same
    thing: the facts do not say)."""
    for n, (claim, check, passages) in enumerate(zip(assessment.targets, assessment.checks, assessment.evidence)):
        if not passages:
            continue
        unsure = (check.verdict in (CONTRADICTED, UNSUPPORTED) and check.confidence < threshold) or (
            check.verdict == UNVERIFIABLE and assessment.closeness[n] >= similarity_floor)
        if when != "always" and not unsure:
            continue
        try:
            judged = await judge.check(claim, passages, exchange)
            assessment.judged += 1
            if not (check.verdict == UNSUPPORTED and judged.verdict == UNVERIFIABLE):
                assessment.checks[n] = judged
        except Exception as exc:  # fail safe: the local verdict stands
            log.warning("the LLM judge failed on %r: %s", claim.text[:80], exc)
            assessment.judge_errors += 1


