"""Grounding (opt-in, `poisoning.grounding: covered_subjects`): in a closed domain, what the KB
does not say about a subject it covers is taken as false.

The default checker only flags what CONTRADICTS the KB, so an answer that invents a cast member,
a date or a product feature for a subject the KB knows passes. For a support bot or a product
catalogue the KB is meant to be complete about its subjects, and such a claim is UNSUPPORTED:

- anchors: the claim's names that the KB covers — some passage names them, exactly or closely
  ("Bloom" → "Orlando Bloom"); a claim with none that says "it"/"she"/"that one" is about the
  subject named just before (earlier in the answer, else in the last two messages);
- a claim with no anchor is not about the KB and passes, as in the default mode;
- every other mention (a name, number, date or KB term) must occur in the documents about an
  anchor, or in the conversation (the user's words, tool results: an answer may repeat them);
  two anchors must occur together (a name the KB knows elsewhere, swapped in, is unsupported);
- confidence = SCALE × how strongly the subject is covered (name match; facts stated about it,
  not a passing mention; named in the claim, not through a pronoun) × how specific the
  unsupported part is (a name or number more than a lower-case term) × how much it looks like a
  false detail rather than a new topic (the claim uses a relation the KB states about the
  subject; something else in it is grounded; a KB passage is close to it), so it falls in the
  same block / quarantine bands as contradictions.
The factors were set on the first half of the HaluEval dialogue set (bench/poisoning.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Sequence

from ..text.claims import Claim, Mention, find_mentions, normalize, refers_back, refers_to_someone
from ..text.relations import relations_in
from .check import UNSUPPORTED, ClaimCheck, frame_similarity
from .kb_index import KnowledgeIndex, Passage, same_value

# how telling an unsupported mention is, by kind (a name or number is a checkable fact; a
# lower-case KB term is often a loose description: "a mystery", "thriller movie")
SPECIFICITY = {"name": 1.0, "number": 0.95, "date": 0.95, "term": 0.6}


@dataclass(frozen=True)
class Conversation:
    """What the conversation already says: mentions there are grounded (the user's order number,
    a tool's lookup result), so an answer may repeat them."""

    keys: frozenset[tuple[str, str]] = frozenset()  # (kind, key) of every mention
    mentions: tuple[Mention, ...] = ()
    text: str = ""  # normalised, space-padded, for lower-case terms
    recent: tuple[Mention, ...] = ()  # names of the last two messages: what "it", "she", "that one" may stand for

    @classmethod
    def of(cls, texts: Sequence[str]) -> "Conversation":
        mentions: list[Mention] = []
        norms: list[str] = []
        for text in texts:
            found, norm = _analysed(text)
            mentions += found
            norms.append(norm)
        recent = tuple(m for text in texts[-2:] for m in _analysed(text)[0] if m.kind == "name")
        return cls(frozenset((m.kind, m.key) for m in mentions), tuple(mentions), " " + " ".join(norms) + " ", recent)

    def says(self, m: Mention) -> bool:
        if (m.kind, m.key) in self.keys or f" {normalize(m.text)} " in self.text:
            return True
        return m.kind in ("number", "date") and any(same_value(m, t) for t in self.mentions if t.kind in ("number", "date"))


@lru_cache(maxsize=4096)
def _analysed(text: str) -> tuple[tuple[Mention, ...], str]:
    """One message's mentions and normalised text (cached: a conversation grows turn by turn)."""
    return tuple(find_mentions(text)), normalize(text)


@dataclass
class _Anchor:
    mention: Mention
    coverage: float  # how strongly the KB covers it
    passages: list[Passage] = field(default_factory=list)  # what the KB says about it


class Grounder:
    """UNSUPPORTED checks for claims about covered subjects that the KB does not back."""

    def __init__(self, scale: float = 0.95, mention_coverage: float = 0.7, resolved: float = 0.8,
                 invented: float = 0.85, alone: float = 0.85, loose: float = 0.8, distant: float = 0.75,
                 near: float = 0.5) -> None:
        self.scale = scale  # the confidence of the clearest case: exact subject, a name swapped in
        self.mention_coverage = mention_coverage  # a subject the KB only mentions, stating no fact about it
        self.resolved = resolved  # a subject found through "it"/"she" may be the wrong one
        self.invented = invented  # a name the KB does not know at all (vs one it knows elsewhere: swapped in)
        self.alone = alone  # nothing else in the claim is grounded (often a new topic, not a false detail)
        self.loose = loose  # the claim does not use a relation the KB states about the subject (vs a swapped value)
        self.distant = distant  # no KB passage is close to the claim (cosine < `near`): more likely a new topic
        self.near = near

    def check(self, claim: Claim, index: KnowledgeIndex, conversation: Conversation | None = None,
              neighbours: Sequence[tuple[Passage, float]] = ()) -> ClaimCheck | None:
        if not claim.checkable:
            return None
        conversation = conversation or Conversation()
        anchors = self._anchors(claim, index, conversation)
        if not anchors:
            return None  # not about anything the KB covers
        unsupported = [m for m in claim.mentions if not self._grounded(m, anchors, conversation)]
        if not unsupported:
            return None
        scored = [(self._specificity(m, index), m) for m in unsupported]
        specificity, worst = max(scored, key=lambda x: x[0])
        subject = max((a for a in anchors if a.mention is not worst), key=lambda a: a.coverage, default=anchors[0])
        partly = len(unsupported) < len(claim.mentions) or any(a.mention.start < 0 for a in anchors)
        swapped = _restates(claim, anchors)
        close = max((sim for _, sim in neighbours), default=1.0) >= self.near
        confidence = (self.scale * subject.coverage * specificity * (1.0 if partly else self.alone)
                      * (1.0 if swapped else self.loose) * (1.0 if close else self.distant))
        evidence = _closest(subject.passages, claim)
        return ClaimCheck(claim.text, UNSUPPORTED, confidence, evidence.text if evidence else "",
                          evidence.id if evidence else "", _kind(worst, index), "grounding")

    def _specificity(self, m: Mention, index: KnowledgeIndex) -> float:
        if m.kind == "name" and not index.passages_naming(m.key):
            return self.invented
        return SPECIFICITY.get(m.kind, 0.5)

    def _anchors(self, claim: Claim, index: KnowledgeIndex, conversation: Conversation) -> list[_Anchor]:
        anchors: list[_Anchor] = []
        for m in claim.mentions:
            if m.kind == "name":  # a lower-case KB term ("book", "fan") is a word, not a subject
                anchor = self._anchor(m, index)
                if anchor is not None:
                    anchors.append(anchor)
        if anchors or not (refers_back(claim.text) or refers_to_someone(claim.text)):
            return anchors
        # "She also wrote X", "Vin Diesel starred in that one": the subject was named before
        named_before = ([claim.context_subject] if claim.context_subject else []) + list(conversation.recent)
        for subject in named_before:
            anchor = self._anchor(subject, index)
            if anchor is not None and all(a.mention.key != subject.key for a in anchors):
                placeholder = Mention(subject.text, subject.key, subject.kind, -1, -1)  # not one of the claim's mentions
                anchors.append(_Anchor(placeholder, anchor.coverage * self.resolved, anchor.passages))
        return anchors

    def _anchor(self, m: Mention, index: KnowledgeIndex) -> _Anchor | None:
        naming = index.passages_naming(m.key)
        if not naming:
            return None
        score = max(s for _, s in naming)
        # the KB states things about it (a fact's subject, or the first name of a sentence), or merely mentions it
        stated = index.is_subject(m.key) or any(_match(f.subject, m) for p, _ in naming for f in p.facts) or any(
            _match(_first_name(p), m) for p, _ in naming if _first_name(p) is not None)
        passages = [p for p, _ in naming]
        seen = {p.id for p in passages}
        for doc in {p.doc_id for p in passages}:  # a document about the subject grounds it as a whole
            passages += [p for p in index.document_passages(doc) if p.id not in seen and not p.stale]
        return _Anchor(m, score * (1.0 if stated else self.mention_coverage), passages)

    def _grounded(self, m: Mention, anchors: Sequence[_Anchor], conversation: Conversation) -> bool:
        others = [a for a in anchors if a.mention is not m]
        if not others and any(a.mention is m for a in anchors):
            return True  # the claim's only covered subject: what it is about, not what it asserts
        if conversation.says(m):
            return True
        return any(_names(p, m) for a in others for p in a.passages)


def _restates(claim: Claim, anchors: Sequence[_Anchor]) -> bool:
    """Does the claim say what the KB says about the subject, with something else in a slot (a
    relation the KB states for it, or a sentence worded like one of its passages)?"""
    passages = [p for a in anchors for p in a.passages]
    if relations_in(claim.text) & {f.relation.name for p in passages for f in p.facts}:
        return True
    return any(frame_similarity(claim.text, claim.mentions, p.text, p.mentions) >= 0.5 for p in passages[:50])


def _first_name(passage: Passage) -> Mention | None:
    return next((m for m in passage.mentions if m.kind == "name"), None)


def _match(a: Mention, b: Mention) -> bool:
    return a.key == b.key or same_value(a, b)


def _names(passage: Passage, m: Mention) -> bool:
    return any(same_value(m, t) for t in passage.mentions)


def _closest(passages: Sequence[Passage], claim: Claim) -> Passage | None:
    """The subject's passage sharing most words with the claim (shown as what the KB does say)."""
    words = set(normalize(claim.text).split())
    return max(passages, key=lambda p: len(words & set(normalize(p.text).split())), default=None)


def _kind(m: Mention, index: KnowledgeIndex) -> str:
    if m.kind in ("number", "date", "term"):
        return "unsupported_" + m.kind
    return "swapped_entity" if index.passages_naming(m.key) else "unsupported_entity"
