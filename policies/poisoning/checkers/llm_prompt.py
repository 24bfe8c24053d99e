"""What the LLM judge is asked and how its answer is read: the prompt (question, numbered
evidence windows, numbered claims), the strict JSON schema, and its validation with pydantic."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal, Sequence

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .base import LABELS, ClaimToCheck, Evidence

KINDS = ("wrong_number", "wrong_date", "wrong_entity", "negated_fact", "contradicted", "none")
CONTEXT_CHARS = 300  # the tail of the answer before a claim: enough to resolve "it", "she"

SYSTEM = """You are a fact checker. You get a user's question, numbered evidence passages from a knowledge base, and numbered claims taken from an assistant's answer to that question.
Read each claim as an answer to the question: a short answer such as "Delhi" to "In what city is the head office?" claims that the head office is in Delhi. Text before a claim (given after "after:") only tells you what words like "it" or "she" refer to.
Judge each claim against the evidence only, not against what you know yourself:
- "supported": the evidence states it or it follows directly from the evidence;
- "contradicted": the evidence shows it is false (another number, date, name or place for the same thing, or the opposite statement);
- "unverifiable": the evidence does not say whether it is true.
For each claim give: index (its number), verdict, confidence (0 to 1, how sure you are of the verdict), evidence (the number of the passage that decides it, or null), kind (for "contradicted": wrong_number, wrong_date, wrong_entity, negated_fact or contradicted; otherwise none).
Answer with JSON only: {"verdicts": [...]}, exactly one entry per claim, in claim order."""

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"verdicts": {"type": "array", "items": {
        "type": "object",
        "properties": {
            "index": {"type": "integer"},
            "verdict": {"type": "string", "enum": list(LABELS)},
            "confidence": {"type": "number"},
            "evidence": {"type": ["integer", "null"]},
            "kind": {"type": "string", "enum": list(KINDS)},
        },
        "required": ["index", "verdict", "confidence", "evidence", "kind"],
        "additionalProperties": False,
    }}},
    "required": ["verdicts"],
    "additionalProperties": False,
}
RESPONSE_FORMAT = {"type": "json_schema", "json_schema": {"name": "claim_verdicts", "strict": True, "schema": SCHEMA}}


class JudgedClaim(BaseModel):
    model_config = ConfigDict(extra="ignore")
    index: int
    verdict: Literal["supported", "contradicted", "unverifiable"]
    confidence: float = Field(ge=0, le=1)
    evidence: int | None = None
    kind: str = "none"

    @field_validator("verdict", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("kind", mode="before")
    @classmethod
    def _known_kind(cls, value: Any) -> str:
        # the kind only labels a contradiction: an unknown one is not worth discarding the verdict for
        return value if value in KINDS else "contradicted" if value else "none"


class Judgement(BaseModel):
    model_config = ConfigDict(extra="ignore")
    verdicts: list[JudgedClaim]


@dataclass
class Prompt:
    messages: list[dict[str, Any]]
    windows: list[str]  # evidence number n is windows[n - 1]
    by_window: dict[str, list[Evidence]] = field(default_factory=dict)
    response_format: dict[str, Any] = field(default_factory=lambda: RESPONSE_FORMAT)

    def evidence_for(self, claim: ClaimToCheck, number: int | None) -> Evidence | None:
        """The passage the judge cited for `claim`: the claim's own when it retrieved that window."""
        if number is None:
            return None
        window = self.windows[number - 1]
        own = [e for e in claim.evidence if e.window == window]
        return (own or self.by_window.get(window) or [None])[0]


def build_prompt(claims: Sequence[ClaimToCheck]) -> Prompt:
    by_window: dict[str, list[Evidence]] = {}
    for claim in claims:
        for ev in claim.evidence:
            by_window.setdefault(ev.window, []).append(ev)
    windows = list(by_window)
    number = {w: n for n, w in enumerate(windows, 1)}
    questions = {c.question for c in claims}
    one_question = len(questions) == 1
    lines = [f"Question: {claims[0].question or '(none)'}", ""] if one_question else []
    lines.append("Evidence:")
    lines += [f"[{number[w]}] {_one_line(w)}" for w in windows]
    lines += ["", "Claims:"]
    for n, claim in enumerate(claims, 1):
        if not one_question:
            lines.append(f"{n}. (question: {_one_line(claim.question) or '(none)'})")
        tail = _one_line(claim.context)[-CONTEXT_CHARS:]
        prefix = f'(after: "…{tail}") ' if tail else ""
        lines.append(f"{n}. {prefix}{_one_line(claim.text)}")
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n".join(lines)}]
    return Prompt(messages, windows, by_window)


_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


def parse_judgement(content: str, claims: int, windows: int) -> list[JudgedClaim]:
    """The judge's verdicts in claim order. Raises ValueError (or pydantic's ValidationError) when
    the JSON is malformed, or does not give exactly one verdict per claim citing known evidence."""
    fenced = _FENCE.match(content)  # endpoints without response_format support may fence the JSON
    judged = Judgement.model_validate_json(fenced.group(1) if fenced else content).verdicts
    indices = sorted(j.index for j in judged)
    if indices != list(range(1, claims + 1)):
        raise ValueError(f"the judge gave verdicts for claims {indices}, expected 1..{claims}")
    for j in judged:
        if j.evidence is not None and not 1 <= j.evidence <= windows:
            raise ValueError(f"the judge cited evidence [{j.evidence}] of {windows}")
    return sorted(judged, key=lambda j: j.index)


def _one_line(text: str) -> str:
    return " ".join(text.split())
