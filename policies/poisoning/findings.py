"""What the poisoning checks found, and how we word it for notices and headers."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..messages import Message, content_text, last_user_index
from .checkers.base import ClaimVerdict

MARK = "[ctxwarden]"  # starts every note and notice we write, so we never judge our own words
OUR_NOTES = re.compile(re.escape(MARK) + r"[^\n]*")


def question_of(messages: list[Message]) -> str:
    """The user's last message (without our notes): what an answer answers."""
    i = last_user_index(messages)
    return OUR_NOTES.sub("", content_text(messages[i])).strip()[-2000:] if i >= 0 else ""

# The policy's verdicts per (tenant, KB version, role, text) hash: by bytes too, since a finding's claim
# may be a whole pasted log without a full stop (cache_size entries of those would hold gigabytes)
VERDICT_BYTES = 8 * 2**20


@dataclass(frozen=True)
class Finding:
    """What is wrong with a piece of content, and how sure we are."""

    kind: str  # poisoning type: wrong_number, wrong_date, wrong_entity, negated_fact, prompt_injection, ...
    claim: str
    evidence: str  # the KB sentence, or the flag rule that matched
    confidence: float
    flagged: bool = False  # matched a flag rule (no KB involved)
    checker: str = "local"  # which checker decided (local | nli | llm)

    @classmethod
    def of(cls, verdict: ClaimVerdict) -> "Finding":
        return cls(verdict.kind or "contradiction", verdict.claim, verdict.evidence, verdict.confidence,
                   checker=verdict.checker)

    def against_kb(self, may: bool = False) -> str:
        """How the claim stands against the knowledge base, for notices."""
        return f'{"may contradict" if may else "contradicts"} the knowledge base: "{self.evidence}"'


def verdict_size(key: str, finding: Finding | None) -> int:
    """A cached verdict's bytes, about: the entry and its key, and a finding's two texts."""
    return 200 + len(key) + (0 if finding is None else 400 + 2 * (len(finding.claim) + len(finding.evidence)))


def short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def header_safe(text: str, limit: int = 500) -> str:
    """HTTP header values are latin-1 without line breaks."""
    text = " ".join(text.split())
    return text.encode("ascii", "replace").decode("ascii")[:limit]
