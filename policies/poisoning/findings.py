"""What the poisoning checks found, and how we word it for notices and headers."""

from __future__ import annotations

from dataclasses import dataclass

from .check import CONTRADICTED, UNSUPPORTED, ClaimCheck

MARK = "[ctxwarden]"  # starts every note and notice we write, so we never judge our own words


@dataclass(frozen=True)
class Finding:
    """What is wrong with a piece of content, and how sure we are."""

    kind: str  # poisoning type: wrong_location, invented_date, prompt_injection, ...
    claim: str
    evidence: str  # the KB fact, or the flag rule that matched
    confidence: float
    flagged: bool = False  # matched a flag rule (no KB involved)
    verdict: str = CONTRADICTED  # or UNSUPPORTED (grounding mode): the KB covers the subject but does not say this

    @classmethod
    def of(cls, check: ClaimCheck) -> "Finding":
        return cls(check.kind or "contradiction", check.claim, check.evidence, check.confidence, verdict=check.verdict)

    def against_kb(self, may: bool = False) -> str:
        """How the claim stands against the knowledge base, for notices."""
        if self.verdict == UNSUPPORTED:
            return (f'{"may not be" if may else "is not"} backed by the knowledge base, which says about this: '
                    f'"{self.evidence}"')
        return f'{"may contradict" if may else "contradicts"} the knowledge base: "{self.evidence}"'


def short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def header_safe(text: str, limit: int = 500) -> str:
    """HTTP header values are latin-1 without line breaks."""
    text = " ".join(text.split())
    return text.encode("ascii", "replace").decode("ascii")[:limit]
