"""The offline checker: verdicts by aligning a claim with its evidence and comparing slots.

A claim is read as an answer to the user's question. What the answer adds to the question — its
names, quantities, dates and content words — is looked up in the evidence retrieved for it:
- all of it found there (at the precision the answer gives: "8.85 km" is "8,849 m") → supported;
- the evidence that answers the same question (or states the same slot about the same subject)
  gives another value — a different quantity or date of the same kind, another name where the
  evidence names one the question did not — or says the opposite (negation) → contradicted;
- the evidence does not cover the question's subject → unverifiable (what the KB does not cover
  passes);
- the evidence says the claim in so many words (an answer quoting the KB) → supported, before any
  slot is compared: its slots were read against the other passages' ("Step 4" against "Step 3", a
  line of code against the sentence introducing it) and blocked 2.7 % of paragraphs quoting their
  own documents (bench/poisoning.py --quoting).
The confidence combines how clearly the evidence covers the subject with how much of the answer's
own content the evidence fails to back (features.py); its weights were fitted on the dev half of
HaluEval QA and are checked on the held-out half (bench/poisoning.py).
"""

from __future__ import annotations

import asyncio
import re
import time
from typing import Sequence

from ...text.slots import fold, words
from .base import CONTRADICTED, SUPPORTED, UNVERIFIABLE, CheckContext, ClaimToCheck, ClaimVerdict, Evidence, unverifiable
from .features import ClaimFeatures, features_of

SUPPORT_FLOOR = 0.5  # below this confidence of a contradiction, a fully backed claim is called supported
_SPACE = re.compile(r"\s+")
QUOTED_WORDS = 5


def _quoting(claim: str, evidence: Sequence[Evidence]) -> Evidence | None:
    """The first passage that contains the claim word for word (case, accents and spacing aside),
    ending where a word or number ends ("at 3" is not said by "at 3:30", nor "in 19" by "in 1990").
    Only a claim of QUOTED_WORDS words or more: a shorter one is a fragment whose meaning the question
    supplies ("Marta Kessler", answering "Who is the younger of the two?", is in her own passage)."""
    said = _SPACE.sub(" ", fold(claim)).strip(" .;:!?")
    if len(words(said)) < QUOTED_WORDS:
        return None
    pattern = re.compile(r"(?<!\w)" + re.escape(said) + r"(?!\w|[.,:]\d)")
    return next((e for e in evidence if pattern.search(_SPACE.sub(" ", fold(e.window)))), None)


class LocalChecker:
    name = "local"

    def __init__(self, cover_floor: float = 0.35) -> None:
        self.cover_floor = cover_floor  # evidence covering less of the question than this says nothing

    async def check(self, claims: Sequence[ClaimToCheck], ctx: CheckContext) -> list[ClaimVerdict]:
        return await asyncio.to_thread(self.check_now, claims)

    def check_now(self, claims: Sequence[ClaimToCheck]) -> list[ClaimVerdict]:
        """Synchronous (CPU only, no model): for callers already off the event loop."""
        return [self.verdict(c) for c in claims]

    def verdict(self, claim: ClaimToCheck) -> ClaimVerdict:
        started = time.perf_counter()
        if not claim.evidence:
            return unverifiable(claim)
        quoting = _quoting(claim.text, claim.evidence)
        if quoting is not None:
            return ClaimVerdict(claim.text, SUPPORTED, 1.0, quoting.sentence, quoting.id,
                                latency_ms=(time.perf_counter() - started) * 1000)
        f = features_of(claim)
        out = self._decide(claim, f)
        out.latency_ms = (time.perf_counter() - started) * 1000
        return out

    def _decide(self, claim: ClaimToCheck, f: ClaimFeatures) -> ClaimVerdict:
        ev = f.best_evidence
        if f.coverage < self.cover_floor:
            return unverifiable(claim)
        confidence = f.contradiction_score()
        if confidence >= SUPPORT_FLOOR:
            return ClaimVerdict(claim.text, CONTRADICTED, confidence, ev.sentence, ev.id, f.kind)
        if f.backed:
            return ClaimVerdict(claim.text, SUPPORTED, 1.0 - confidence, ev.sentence, ev.id)
        return ClaimVerdict(claim.text, UNVERIFIABLE, confidence, ev.sentence, ev.id, f.kind)
