"""The hybrid checker (`checker: hybrid`): the local checker first, the LLM judge only where it is unsure.

A local verdict stands when it is sure: its confidence is outside `uncertain_band` [low, high).
The judge gets, in one call for the whole answer:
- the claims whose local confidence falls inside the band;
- the claims the local checker called unverifiable although the KB holds a close passage for them
  (cosine similarity >= `close_evidence`, 0.5 by default): the local checker could not align the
  wording, but the KB does speak about the subject, so a reader could well tell.
Claims without evidence never go (nothing to judge against). Each verdict's `checker` says who
decided it ("local" or "llm"; a judge failure leaves the local verdict, noted "fallback: …").
"""

from __future__ import annotations

from typing import Sequence

from .base import UNVERIFIABLE, CheckContext, Checker, ClaimToCheck, ClaimVerdict

CLOSE_EVIDENCE = 0.5  # cosine similarity at which a passage is about the claim's subject, not merely near it


class HybridChecker:
    name = "hybrid"

    def __init__(self, local: Checker, judge: Checker, uncertain_band: tuple[float, float],
                 close_evidence: float = CLOSE_EVIDENCE) -> None:
        low, high = uncertain_band
        if not 0 <= low <= high <= 1:
            raise ValueError(f"hybrid.uncertain_band must be [low, high] with 0 <= low <= high <= 1 (got {list(uncertain_band)})")
        self.local = local
        self.judge = judge
        self.band = (low, high)
        self.close_evidence = close_evidence

    async def check(self, claims: Sequence[ClaimToCheck], ctx: CheckContext) -> list[ClaimVerdict]:
        verdicts = list(await self.local.check(claims, ctx))
        unsure = [i for i, (claim, verdict) in enumerate(zip(claims, verdicts)) if self.unsure(claim, verdict)]
        if unsure:
            judged = await self.judge.check([claims[i] for i in unsure], ctx)
            for i, verdict in zip(unsure, judged):
                verdicts[i] = verdict
        return verdicts

    def unsure(self, claim: ClaimToCheck, verdict: ClaimVerdict) -> bool:
        """Whether the judge should see this claim (see the module's docstring)."""
        if not claim.evidence:
            return False
        low, high = self.band
        if low <= verdict.confidence < high:
            return True
        return verdict.label == UNVERIFIABLE and max(e.similarity for e in claim.evidence) >= self.close_evidence

    async def aclose(self) -> None:
        close = getattr(self.judge, "aclose", None)
        if close is not None:
            await close()
