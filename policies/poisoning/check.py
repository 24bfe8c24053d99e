"""Decide, claim by claim, SUPPORTED / CONTRADICTED / UNVERIFIABLE against the knowledge base.

Two checkers share one result type:
- `LocalChecker` (the default): offline, no model. It compares the facts a claim states with
  the KB's facts about the same subject (relations.py), and, for claims with no recognised
  relation, looks for a slot substitution in the nearest passages (same subject, high
  embedding similarity, a name/number/date swapped: "located in London" vs "located in Paris").
- `LLMJudge` (optional, `poisoning.judge_model`): asks a model through the upstream, with the
  nearest passages as evidence, and parses a JSON verdict.
A claim the KB says nothing about is UNVERIFIABLE and passes: the KB is the reference, and
silence is not a contradiction (unless `grounding: covered_subjects` says otherwise for the
subjects the KB covers: grounding.py, UNSUPPORTED).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Sequence

from ..text.claims import Claim, Mention, negated
from ..text.relations import CREATOR_FAMILY, Fact, extract_facts, has_relation_word
from .kb_index import KnowledgeIndex, Passage, name_match, same_value

SUPPORTED = "SUPPORTED"
CONTRADICTED = "CONTRADICTED"
UNVERIFIABLE = "UNVERIFIABLE"
UNSUPPORTED = "UNSUPPORTED"  # grounding mode only: about a subject the KB covers, but not backed by it (grounding.py)
# "Spielberg directed Titanic" where the KB says "Titanic is written by James Cameron" and names
# Spielberg nowhere near it: a creator of the same work under a related relation is suspicious
# (quarantine band: 0.7 × the relation's weight), never sure enough to block
FAMILY_FACTOR = 0.7


@dataclass
class ClaimCheck:
    claim: str
    verdict: str
    confidence: float  # how sure the checker is of `verdict`
    evidence: str = ""  # the KB passage that decided it
    evidence_id: str = ""
    kind: str = ""  # the poisoning type when contradicted: wrong_location, invented_date, ...
    checker: str = "local"

    def as_dict(self) -> dict[str, Any]:
        return {"claim": self.claim, "verdict": self.verdict, "confidence": round(self.confidence, 3),
                "evidence": self.evidence, "evidence_id": self.evidence_id, "kind": self.kind, "checker": self.checker}


def unverifiable(claim: Claim) -> ClaimCheck:
    return ClaimCheck(claim.text, UNVERIFIABLE, 0.0)


class LocalChecker:
    """Facts first; then slot substitution against the nearest passages."""

    def __init__(self, similarity_floor: float = 0.8) -> None:
        self.similarity_floor = similarity_floor

    def check(self, claim: Claim, index: KnowledgeIndex, neighbours: Sequence[tuple[Passage, float]]) -> ClaimCheck:
        if not claim.checkable:
            return unverifiable(claim)
        facts = extract_facts(claim.text, claim.mentions, claim.context_subject)
        by_facts = [self._check_fact(claim, f, index) for f in facts]
        if negated(claim.text):
            by_facts = [_deny(c) for c in by_facts]
        decided = [c for c in by_facts if c.verdict != UNVERIFIABLE]
        if decided:
            contradicted = [c for c in decided if c.verdict == CONTRADICTED]
            supported = [c for c in decided if c.verdict == SUPPORTED]
            if contradicted:
                worst = max(contradicted, key=lambda c: c.confidence)
                # a value the KB confirms elsewhere in the same claim makes a contradiction less likely
                if supported:
                    worst.confidence *= 0.6
                return worst
            return max(supported, key=lambda c: c.confidence)
        if facts or has_relation_word(claim.text):
            return unverifiable(claim)  # the claim states facts, but not ones the KB has
        return self._check_substitution(claim, neighbours, index)

    def _check_fact(self, claim: Claim, fact: Fact, index: KnowledgeIndex) -> ClaimCheck:
        known = index.facts_about(fact.subject)
        same = [(f, p, s) for f, p, s in known if f.relation.name == fact.relation.name]
        for f, p, s in same:
            if same_value(fact.value, f.value):
                return ClaimCheck(claim.text, SUPPORTED, 0.95 * s, p.text, p.id)
        if same:
            f, p, s = max(same, key=lambda x: x[2])
            confidence = fact.relation.weight * s * _kind_agreement(fact.value, f.value)
            return ClaimCheck(claim.text, CONTRADICTED, confidence, p.text, p.id, fact.relation.kind)
        # a related relation ("directed by B" where the KB says "written by A"): suspicious, when the
        # claimed person is not linked to the subject at all (FAMILY_FACTOR)
        family = [(f, p, s) for f, p, s in known
                  if fact.relation.name in CREATOR_FAMILY and f.relation.name in CREATOR_FAMILY]
        if family and not any(same_value(fact.value, f.value) for f, _, _ in known):
            f, p, s = max(family, key=lambda x: x[2])
            return ClaimCheck(claim.text, CONTRADICTED, FAMILY_FACTOR * fact.relation.weight * s, p.text, p.id, fact.relation.kind)
        return unverifiable(claim)

    def _check_substitution(self, claim: Claim, neighbours: Sequence[tuple[Passage, float]], index: KnowledgeIndex) -> ClaimCheck:
        """A claim with no known relation word: find a passage that says the same thing with one
        name, number or date swapped ("Our refund window is 90 days" vs "… is 30 days")."""
        candidates = {p.id: p for p, _ in neighbours}
        for m in claim.names:
            candidates.update((p.id, p) for p in index.passages_with(m.key))
        best: ClaimCheck | None = None
        for passage in candidates.values():
            if passage.stale:
                continue
            ours, theirs = claim.mentions, passage.mentions
            frame = frame_similarity(claim.text, ours, passage.text, theirs)
            if frame < 0.5:
                continue  # worded differently: neither support nor a swapped slot
            novel = [m for m in ours if not any(_agree(m, t) for t in theirs)]
            missing = [t for t in theirs if not any(_agree(m, t) for m in ours)]
            quantity = bool(novel) and novel[0].kind in ("number", "date")
            subject, their_subject = _first_name(ours), _first_name(theirs)
            same_subject = subject is not None and their_subject is not None and _agree(subject, their_subject)
            nameless = subject is None and frame >= 0.8 and len(ours) == len(theirs)  # "Our refund window is 30 days"
            if not same_subject and not nameless:
                continue  # not about the same subject
            if not novel and frame >= 0.5:
                check = ClaimCheck(claim.text, SUPPORTED, frame, passage.text, passage.id)
            elif len(novel) == 1 and frame >= 0.75 and any(novel[0].kind == t.kind for t in missing):
                # an unknown relation may have many values (a company acquires many others):
                # a swapped name is suspicious (quarantine at most); a swapped quantity is clearer
                cap = 0.9 if quantity else 0.75
                kind = {"number": "wrong_number", "date": "invented_date"}.get(novel[0].kind, "wrong_entity")
                check = ClaimCheck(claim.text, CONTRADICTED, 0.5 + (cap - 0.5) * (frame - 0.75) / 0.25, passage.text, passage.id, kind)
            else:
                continue
            if best is None or (check.verdict, check.confidence) > (best.verdict, best.confidence):
                best = check
        return best or unverifiable(claim)


_FRAME_WORD = re.compile(r"[\w'’]+")
_ARTICLES = frozenset({"the", "a", "an"})


def frame_similarity(a: str, a_mentions: Sequence[Mention], b: str, b_mentions: Sequence[Mention]) -> float:
    """How alike two sentences are once every mention is replaced by its kind (Jaccard of words)."""
    return _jaccard(_frame(a, a_mentions), _frame(b, b_mentions))


def _frame(text: str, mentions: Sequence[Mention]) -> set[str]:
    for m in sorted(mentions, key=lambda m: m.start, reverse=True):
        text = f"{text[: m.start]} mention_{m.kind} {text[m.end :]}"
    return {w.lower() for w in _FRAME_WORD.findall(text)} - _ARTICLES


def _jaccard(x: set[str], y: set[str]) -> float:
    return len(x & y) / len(x | y) if x or y else 0.0


def _deny(check: ClaimCheck) -> ClaimCheck:
    """A denied claim: denying a KB fact contradicts it; denying something else agrees with the KB."""
    if check.verdict == SUPPORTED:
        return ClaimCheck(check.claim, CONTRADICTED, 0.85 * check.confidence, check.evidence, check.evidence_id, "denied_fact")
    if check.verdict == CONTRADICTED:
        return ClaimCheck(check.claim, UNVERIFIABLE, 0.0)
    return check


def _first_name(mentions: Sequence[Mention]) -> Mention | None:
    return next((m for m in mentions if m.kind == "name"), None)


def _agree(a: Mention, b: Mention) -> bool:
    if a.kind != b.kind and not {a.kind, b.kind} <= {"number", "date"}:
        return False
    return same_value(a, b)


def _kind_agreement(claimed: Mention, known: Mention) -> float:
    """A name where the KB has a name is a clear swap; a name where it has a date is less clear."""
    if claimed.kind == known.kind or {claimed.kind, known.kind} <= {"number", "date"}:
        return 1.0
    return 0.6


# ----------------------------------------------------------------------------- LLM judge

JUDGE_PROMPT = """You check one claim against facts from a knowledge base.
Facts:
{facts}

Claim: {claim}

Answer with JSON only: {{"verdict": "SUPPORTED" | "CONTRADICTED" | "UNVERIFIABLE", "confidence": <0..1>, "fact": "<the fact that decides it, or empty>"}}.
CONTRADICTED only when a fact above shows the claim is false; UNVERIFIABLE when the facts do not say."""


class LLMJudge:
    """A verdict from a model through the upstream (services.complete)."""

    def __init__(self, complete: Callable[..., Awaitable[str]], model: str) -> None:
        self.complete = complete
        self.model = model

    async def check(self, claim: Claim, passages: Sequence[Passage], exchange: Any = None) -> ClaimCheck:
        facts = "\n".join(f"- [{p.id}] {p.text}" for p in passages) or "- (none)"
        prompt = JUDGE_PROMPT.format(facts=facts, claim=claim.text)
        reply = await self.complete(self.model, [{"role": "user", "content": prompt}], exchange=exchange, temperature=0)
        return parse_judgement(claim, reply, passages)


def parse_judgement(claim: Claim, reply: str, passages: Sequence[Passage]) -> ClaimCheck:
    """Read the judge's JSON (tolerating prose or code fences around it)."""
    match = re.search(r"\{.*\}", reply, re.DOTALL)
    if not match:
        raise ValueError(f"the judge did not answer with JSON: {reply[:200]!r}")
    data = json.loads(match.group(0))
    verdict = str(data.get("verdict", "")).upper()
    if verdict not in (SUPPORTED, CONTRADICTED, UNVERIFIABLE):
        raise ValueError(f"the judge's verdict is not one of SUPPORTED/CONTRADICTED/UNVERIFIABLE: {verdict!r}")
    confidence = min(1.0, max(0.0, float(data.get("confidence", 0.5))))
    fact = str(data.get("fact") or "")
    best = max(passages, key=lambda p: name_match(fact.lower(), p.text.lower()) if fact else 0, default=None)
    return ClaimCheck(claim.text, verdict, confidence, fact or (best.text if best else ""),
                      best.id if best else "", "judged" if verdict == CONTRADICTED else "", "judge")
