"""What the local checker measures when it lays a claim next to its evidence.

- coverage: how much of the question's subject (its names, else its content words) the evidence
  mentions — evidence about something else can neither back nor refute the claim;
- the answer's own slots (names, quantities, dates not already in the question) and content
  words, and the share of each the evidence backs;
- conflicts: a quantity or date of the same kind with another value in the evidence sentence
  aligned with the claim, another name in the evidence that answers the question where the claim
  names an unbacked one, a negation one side has and the other lacks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ...text.counted import same_slot
from ...text.slots import Slot, agree, content_words, fold
from .answered import answered_otherwise
from .asked import asked_slots
from .base import ClaimToCheck, Evidence
from .choice import BY_DATES, BY_WORDS, asks_for_value, choice_conflict, polar_conflict
from .misplaced import misplaced
from .readings import names_of as _names
from .readings import slots_of as _slots_of
from .readings import subjects_of
from .readings import words_of as _words_of
from .roles import additive, clauses, in_list, negated_statement, role, same_role

# Weights of the contradiction score (a logistic model over the features below), fitted on the
# dev half of HaluEval QA with bench/poisoning.py --fit; the held-out half reports the result.
WEIGHTS = {
    "bias": -1.06,
    "unbacked_slots": 1.94,  # share of the answer's own names/quantities/dates the evidence lacks
    "unbacked_words": 5.24,  # share of the answer's own content words the evidence lacks
    "unbacked_any": 2.52,  # any of its own names/quantities/dates unbacked
    "value_conflict": 0.71,  # a quantity/date of the same kind with another value (also counted as unbacked)
    "name_conflict": 0.47,  # an unbacked name where the evidence has one the question did not give
    "negation_conflict": 1.71,
    "coverage": -0.5,
    "distance": 0.62,  # 1 - cosine similarity of question + claim and the closest evidence sentence
    "rival_predicate": 2.0,  # the claim's predicate words sit in evidence with another name
    "choice_conflict": 2.26,  # a choice ordered in time: the answer picks the option the dates do not
    "choice_lean": 1.95,  # ... or the other option's profile states the question's predicate, this one's not
    "unanswered": 2.18,  # the question asks for a value (not yes/no, no options) and the claim adds none
}

FLOORS = {"value_conflict": 0.92, "negation_conflict": 0.85, "name_conflict": 0.85, "choice_conflict": 0.85,
          "answered_otherwise": 0.85}
TOPIC_SLACK = 0.2  # documents about the question: within this of the best one's share of its names
WORDING_CAP = 0.4  # unbacked wording alone (every name/number/date backed): passes by default
UNBACKED_CAP = 0.45  # an unbacked name/number/date the KB names no rival for: unverifiable, passes
CAP_BAND = 0.1  # below a cap, the top of the scale is squeezed into this band (keeps the order)


@dataclass
class ClaimFeatures:
    best_evidence: Evidence
    coverage: float = 0.0
    own_slots: list[Slot] = field(default_factory=list)
    unbacked: list[Slot] = field(default_factory=list)
    own_words: int = 0
    unbacked_words: int = 0
    value_conflict: bool = False
    name_conflict: bool = False
    negation_conflict: bool = False
    similarity: float = 0.0  # the closest evidence sentence's cosine similarity to question + claim
    rival_predicate: bool = False  # the claim's predicate words sit in evidence with another name
    choice_conflict: bool = False  # a choice ordered in time answered against the dates (choice.py)
    choice_lean: bool = False  # a choice or yes/no answered against what the options' profiles state
    unanswered: bool = False  # the question asks for a value; the claim gives none of its own
    answered_otherwise: bool = False  # the KB's sentence that answers the question names another (answered.py)

    @property
    def backed(self) -> bool:
        return not self.unbacked and self.unbacked_words <= max(1, self.own_words // 4) and not self.negation_conflict

    @property
    def kind(self) -> str:
        if self.value_conflict:
            return "wrong_date" if any(s.kind == "date" for s in self.unbacked) else "wrong_number"
        if self.negation_conflict:
            return "negated_fact"
        if self.choice_conflict or self.choice_lean:
            return "wrong_entity"
        if self.name_conflict or self.answered_otherwise or any(s.kind == "name" for s in self.unbacked):
            return "wrong_entity"
        return "unsupported_detail"

    def vector(self) -> dict[str, float]:
        """Each signal weighed by coverage: unbacked content matters where the KB covers the subject."""
        c = self.coverage
        return {
            "unbacked_slots": c * (len(self.unbacked) / len(self.own_slots) if self.own_slots else 0.0),
            "unbacked_words": c * (self.unbacked_words / self.own_words if self.own_words else 0.0),
            "unbacked_any": c * float(bool(self.unbacked)),
            "value_conflict": c * float(self.value_conflict),
            "name_conflict": c * float(self.name_conflict),
            "negation_conflict": c * float(self.negation_conflict),
            "coverage": c,
            "distance": c * (1.0 - self.similarity),
            "rival_predicate": c * float(self.rival_predicate),
            "choice_conflict": c * float(self.choice_conflict),
            "choice_lean": c * float(self.choice_lean),
            "unanswered": c * float(self.unanswered),
        }

    def contradiction_score(self) -> float:
        """The fitted model's probability, raised to a floor for a clear slot conflict where the
        KB covers the subject (another value of the same kind, a negated statement, another name
        in the same role), and capped below blocking when nothing but wording is unbacked."""
        z = WEIGHTS["bias"] + sum(WEIGHTS[k] * v for k, v in self.vector().items())
        p = 1.0 / (1.0 + math.exp(-z))
        floor = max(FLOORS[k] * getattr(self, k) for k in FLOORS)
        if not (self.unbacked or self.negation_conflict or self.rival_predicate or self.choice_conflict or self.choice_lean):
            p = _cap(p, WORDING_CAP)
        elif not (self.value_conflict or self.name_conflict or self.negation_conflict or self.choice_conflict
                  or self.answered_otherwise):
            p = _cap(p, UNBACKED_CAP)
        return max(p, floor * self.coverage)


def _cap(p: float, cap: float) -> float:
    """Keep p below cap, squeezing the top of the scale into [cap - CAP_BAND, cap) rather than
    cutting it off: capped answers still pass by default, but keep their order (a hard cap ties
    them all, and a threshold can then only take all or none)."""
    knee = cap - CAP_BAND
    return p if p <= knee else knee + CAP_BAND * (p - knee) / (1.0 - knee)


def features_of(claim: ClaimToCheck) -> ClaimFeatures:
    evidence = claim.evidence
    asked = asked_slots(claim.question, [e.window for e in evidence])
    said = [s for s in _slots_of(claim.text) if not any(_restates(s, q) for q in asked)]
    ev_text = _backing_text(claim, asked)
    ev_slots = _slots_of(ev_text)
    ev_folded = fold(ev_text)
    ev_words = _words_of(ev_text)
    unbacked = [s for s in said if not _backs(s, ev_slots, ev_words) and not _written_in(s, ev_folded)]
    own_words = _words_of(claim.text) - _words_of(claim.question) - {w for s in said for w in content_words(s.text)}
    # what the answer is about: the question's subject, or (a question like "tell me more") the claim's
    subjects = _names_in(claim.text) or _names_in(claim.context)[:1]
    all_text = " ".join(e.window for e in evidence)
    coverage = max([_coverage(claim.question, asked, all_text) if claim.question else 0.0]
                   + [_coverage(n, _slots_of(n), all_text) for n in subjects])
    f = ClaimFeatures(best_evidence=_aligned(claim), coverage=coverage,
                      own_slots=said, unbacked=unbacked, own_words=len(own_words),
                      unbacked_words=len(own_words - ev_words))
    aligned = f.best_evidence.sentence
    about = [x for x in evidence if _mentions_subject(x.window, asked, said)]
    if not about and not _subject_names(asked, said):  # "It opened in 1925": the closest evidence
        about = [f.best_evidence]
    names = _names(claim.text)  # once: a long claim's slots are not cached, and it may hold hundreds of values
    single = [s for s in unbacked if s.kind in ("number", "date") and _single_value(claim.text, s, names)]
    f.value_conflict = any(_conflicts(s, claim.text, _slots_of(x.sentence), x.sentence) for x in about for s in single)
    about_slots = _slots_of(" ".join(x.window for x in about))
    off_subject = [s for s in said if s.kind == "name" and not any(agree(s, e) for e in about_slots)]
    f.name_conflict = _name_conflict(claim, f.best_evidence, off_subject, asked, said) or misplaced(
        claim.text, claim.question, [s for s in said if s.kind == "name"], [q for q in asked if q.kind == "name"], about)
    f.similarity = max(e.similarity for e in evidence)
    f.rival_predicate = _rival_predicate(claim, said, asked, own_words)
    f.negation_conflict = _negation_conflict(claim.text, aligned)
    f.unanswered = not said and not own_words and asks_for_value(claim.question)
    in_docs = {x.doc_id for x in about}  # a document about the subject is about it throughout ("It was founded by …")
    f.answered_otherwise = answered_otherwise(claim.text, claim.question, unbacked, asked, said,
                                              [x for x in evidence if x.doc_id in in_docs])
    how = choice_conflict(claim.text, claim.question, evidence)
    f.choice_conflict = how == BY_DATES
    f.choice_lean = how == BY_WORDS or polar_conflict(claim.text, claim.question, evidence)
    return f


def _restates(slot: Slot, asked: Slot) -> bool:
    """The claim's slot is one the question gave: it agrees with it and, for a name, adds no word
    ("Calder" restates the question's "Calder & Finch"; "Helen Calder" names someone new)."""
    return agree(slot, asked) and (slot.kind != "name" or set(slot.value) <= set(asked.value))


def _backing_text(claim: ClaimToCheck, asked: tuple[Slot, ...]) -> str:
    """The evidence that may back the answer: the documents about what the question asks (a
    "Labour" found in a passage about another politician backs nothing about this one), and
    those about a name those documents give (the second hop of "the party of the man who opened
    it": a passage opening with that name, not one that merely mentions "United Kingdom" too).
    Without a question, all of it."""
    by_doc: dict[str, list[str]] = {}
    for e in claim.evidence:
        by_doc.setdefault(e.doc_id, []).append(e.window)
    texts = {d: " ".join(w) for d, w in by_doc.items()}
    if not claim.question or len(texts) == 1:
        return " ".join(texts.values())
    cover = {d: _topic(claim.question, asked, t) for d, t in texts.items()}
    best = max(cover.values())
    kept = [d for d in texts if cover[d] >= best - TOPIC_SLACK]
    asked_names = [q for q in asked if q.kind == "name"]  # the hop: a full name the kept ones give
    known = [n for d in kept for n in _names(texts[d]) if len(n.value) >= 2 and not any(agree(n, q) for q in asked_names)]
    kept += [d for d in texts if d not in kept and any(agree(n, k) for n in subjects_of(texts[d]) for k in known)]
    return " ".join(texts[d] for d in kept)


def _backs(slot: Slot, ev_slots: tuple[Slot, ...], ev_words: frozenset[str]) -> bool:
    """The evidence gives the slot at the precision the claim does: "Nixon" is backed by "Richard
    Nixon" (a name of as many words agrees as slots.agree says), "Chinese-American" not by "American"."""
    full = slot.kind != "name" or _words_of(slot.text) <= ev_words
    return any(agree(slot, e) and (full or len(e.value) >= len(slot.value)) for e in ev_slots)


def _written_in(slot: Slot, text: str) -> bool:
    """The slot written out in the (folded) text; a number as a whole, not part of another ("5-inch"
    is not in "3.5-inch", "1" not in "18"). Anything may touch a name or date: KB text is often
    glued where a separator went missing ("released 20162016 was", "Is WideThe Water")."""
    folded = fold(slot.text)
    if slot.kind != "number":
        return folded in text
    at = text.find(folded)
    while at >= 0:
        end = at + len(folded)
        if not (at and (text[at - 1] in ".," or text[at - 1].isdigit())) and not text[end:end + 1].isdigit():
            return True
        at = text.find(folded, at + 1)
    return False


def _negation_conflict(text: str, aligned: str) -> bool:
    """One says the opposite of the other: a clause of the claim that restates the aligned
    evidence (most of its words are there) with a negation the evidence's clause it restates
    lacks, or without the one it has ("6.2 km long" restates "the 6.2 km long track is a street
    circuit", not "when no races are run"). Negators inside names ("No Strings Attached") negate nothing."""
    ev = [(e, negated_statement(e, _names(e))) for e in clauses(aligned)] or [(aligned, False)]
    for c in clauses(text):
        if len(_words_of(c)) < 3 or _overlap(c, aligned) < 0.6:
            continue
        restated = max(ev, key=lambda e: _overlap(c, e[0]))  # the evidence clause it restates
        if negated_statement(c, _names(c)) != restated[1]:
            return True
    return False


def _mentions_subject(window: str, asked: tuple[Slot, ...], said: list[Slot]) -> bool:
    """Evidence about the same subject: it names what the question (else the claim) names."""
    names = _subject_names(asked, said)
    ev = _slots_of(window)
    return any(agree(n, e) for n in names for e in ev)


def _subject_names(asked: tuple[Slot, ...], said: list[Slot]) -> list[Slot]:
    """What the claim is about: the names the question gives and the claim's first ("X is in Y": X)."""
    return [s for s in asked if s.kind == "name"] + [s for s in said if s.kind == "name"][:1]


def _name_conflict(claim: ClaimToCheck, evidence: Evidence, off_subject: list[Slot],
                   asked: tuple[Slot, ...], said: list[Slot]) -> bool:
    """A name the evidence about the subject lacks where that evidence gives the same role of the
    same subject to another ("stands in Berlin" / "in Paris", "directed by X" / "directed by Y").
    A "Paris" found only in a passage about the Louvre does not back "the Eiffel Tower is in
    Paris". A name the KB never puts in that role for that subject is unverifiable, not wrong: in
    open conversation the KB is rarely complete, and a claim that adds a value ("she also wrote",
    a list of titles) fills a role that holds many."""
    if not off_subject or additive(claim.text):
        return False
    subject = [s for s in asked if s.kind == "name"] + [s for s in said if s.kind == "name" and s not in off_subject]
    roles = [r for s in off_subject if not in_list(claim.text, s) and (r := role(claim.text, s))]
    for ev in (evidence, *(e for e in claim.evidence if e.doc_id == evidence.doc_id)):
        # the aligned passage's document, about the same subject ("It was directed by X": the sentence before names it)
        if roles and (not subject or any(agree(n, e) for n in subject for e in _slots_of(ev.window))):
            rivals = [e for e in _slots_of(ev.sentence) if e.kind == "name" and not any(agree(e, q) for q in asked)
                      and not any(agree(e, s) for s in said)]
            if any(same_role(mine, role(ev.sentence, r)) for r in rivals for mine in roles):
                return True
    return False


def _single_value(text: str, slot: Slot, names: list[Slot]) -> bool:
    """A value the claim gives as the one value of its slot: not one of a list ("in 2009 and
    2010"), not a bare count inside a title ("Spy Kids 3-D", "Reno 911")."""
    if in_list(text, slot):
        return False
    if slot.kind == "number" and slot.value[1] == "count":
        last = max((n.end for n in names if n.end <= slot.start), default=None)  # the closest name before it
        glued = last is not None and not text[last:slot.start].strip()
        return not (glued or text[slot.end:slot.end + 1] in ("-", "'"))
    return True


def _rival_predicate(claim: ClaimToCheck, said: list[Slot], asked: tuple[Slot, ...], own: frozenset[str]) -> bool:
    """The claim's own words (its predicate: "directed", "founded") appear in an evidence sentence
    that names someone/something the claim and the question do not, while the claim's names are
    absent from that sentence: the KB gives that role to another."""
    names = [s for s in said if s.kind == "name"]
    if not names or not own:
        return False
    for e in claim.evidence:
        ev_words = _words_of(e.sentence)
        if not own & ev_words:
            continue
        ev_slots = _slots_of(e.sentence)
        if any(agree(n, x) for n in names for x in ev_slots):
            continue
        if any(x.kind == "name" and not any(agree(x, q) for q in asked) for x in ev_slots):
            return True
    return False


def _names_in(text: str) -> list[str]:
    """Without a question that names it (a tool result, "tell me more"): what the claim is about
    is one of the names it mentions (or, for "It opened in 1889", the text before it does)."""
    return [s.text for s in _slots_of(text) if s.kind == "name"]


def _aligned(claim: ClaimToCheck) -> Evidence:
    """The evidence sentence closest to the claim: most of the claim's words, then retrieval rank."""
    return max(claim.evidence, key=lambda e: (_overlap(claim.text, e.sentence) + _overlap(claim.question, e.sentence), e.score))


def _overlap(a: str, b: str) -> float:
    words = _words_of(a)
    return len(words & _words_of(b)) / len(words) if words else 0.0


def _topic(question: str, asked: tuple[Slot, ...], text: str) -> float:
    """How squarely a document is about what the question names: the share of the question's
    names it writes out in full (a passage saying "German" is not about the German Grand Prix),
    then (a tie-break, or alone when the question names nothing) the share of its words."""
    names = [s for s in asked if s.kind == "name"]
    by_words = _coverage(question, (), text)
    if not names:
        return by_words
    folded = fold(text)
    whole = sum(1 for n in names if fold(n.text) in folded  # written out, else a name that holds all its words
                or any(n.kind == e.kind and set(n.value) <= set(e.value) for e in _slots_of(text)))
    return whole / len(names) + 0.1 * by_words


def _coverage(question: str, asked: tuple[Slot, ...], ev_text: str) -> float:
    """How much of what the question is about the evidence mentions: the larger of the share of
    its names and the share of its content words found there."""
    names = [s for s in asked if s.kind == "name"]
    by_names = 0.0
    if names:
        folded = fold(ev_text)
        by_names = sum(1 for s in names if fold(s.text) in folded or any(agree(s, e) for e in _slots_of(ev_text))) / len(names)
    words = _words_of(question)
    by_words = len(words & _words_of(ev_text)) / len(words) if words else 0.0
    return max(by_names, by_words)


def _conflicts(slot: Slot, text: str, others: tuple[Slot, ...], other_text: str) -> bool:
    """Another value of the same kind (and, for quantities, the same dimension; for plain numbers,
    a count of the same thing and no identifier: text/counted.py)."""
    for o in others:
        if o.kind != slot.kind:
            continue
        if slot.kind == "number" and (o.value[1] != slot.value[1] or not same_slot(slot, text, o, other_text)):
            continue
        if not agree(slot, o):
            return True
    return False
