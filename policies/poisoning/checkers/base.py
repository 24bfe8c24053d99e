"""What every checker shares: the claim it is given (with its evidence), the verdict it returns,
and the one interface (`Checker`) the poisoning policy calls, whatever decides the verdict.

A checker judges all claims of one answer in one call, so a model-backed checker can batch them
(the LLM judge makes ONE request per answer). Verdicts say which checker decided, how long it
took and, for model calls, how many tokens it used: the policy reports these in its span, in a
metric and in the quarantine record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence

SUPPORTED = "supported"
CONTRADICTED = "contradicted"
UNVERIFIABLE = "unverifiable"
LABELS = (SUPPORTED, CONTRADICTED, UNVERIFIABLE)


@dataclass(frozen=True)
class Evidence:
    """One KB passage retrieved for a claim: the sentence, with its neighbours for context."""

    id: str  # "<document id>#<n>" of the central sentence
    doc_id: str
    sentence: str  # the central sentence
    window: str  # the sentence with its neighbours in the same document (what a reader sees)
    score: float  # fused retrieval score (reciprocal rank fusion), higher is closer
    similarity: float = 0.0  # cosine similarity of the query and the sentence


@dataclass(frozen=True)
class ClaimToCheck:
    """A claim of the answer, read as an answer to `question`, with the evidence retrieved for it."""

    text: str
    question: str
    evidence: tuple[Evidence, ...]
    context: str = ""  # the answer's text before this claim (resolves "it", "she")


@dataclass
class ClaimVerdict:
    claim: str
    label: str  # SUPPORTED | CONTRADICTED | UNVERIFIABLE
    confidence: float  # how sure the checker is of `label`, 0..1
    evidence: str = ""  # the evidence sentence that decided it
    evidence_id: str = ""
    kind: str = ""  # when contradicted: wrong_number, wrong_date, wrong_entity, negated_fact, contradicted
    checker: str = "local"  # which checker decided: local | nli | llm
    latency_ms: float = 0.0
    tokens: int = 0  # model tokens spent on this verdict (its share of one batched call)
    note: str = ""  # e.g. "fallback: judge timed out"

    def as_dict(self) -> dict[str, Any]:
        return {"claim": self.claim, "verdict": self.label, "confidence": round(self.confidence, 3),
                "evidence": self.evidence, "evidence_id": self.evidence_id, "kind": self.kind,
                "checker": self.checker, "latency_ms": round(self.latency_ms, 2), "tokens": self.tokens,
                **({"note": self.note} if self.note else {})}


def unverifiable(claim: ClaimToCheck, checker: str = "local") -> ClaimVerdict:
    return ClaimVerdict(claim.text, UNVERIFIABLE, 0.0, checker=checker)


@dataclass
class CheckContext:
    """What a model-backed checker may need from the request: the exchange (upstream headers,
    tenant) and where to record what it did."""

    exchange: Any = None
    events: list[dict[str, Any]] = field(default_factory=list)  # e.g. {"event": "judge_fallback", "reason": ...}


class Checker(Protocol):
    name: str

    async def check(self, claims: Sequence[ClaimToCheck], ctx: CheckContext) -> list[ClaimVerdict]:
        """One verdict per claim, in order. Must not raise for a model failure: fall back and
        record the event in ctx.events instead."""
        ...
