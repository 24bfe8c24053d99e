"""Statements from typed values in any domain: a value, what it is about, and its polarity.

"The launch slipped to March 21", "Keep the meeting to 45 minutes", "the host is db-prod-02":
each typed value (typed.py) the user states becomes a statement on the slot "v.<type>" (a date,
a duration, a count of epochs, a name, ...), with the subject words of its clause
(subject.py). Two such statements are about the same thing when their types agree and their
subjects match (clash/match.py: shared words, or embedding similarity where the policy has an
embedder); the specific rules (rules.py, person.py, values.py) take precedence where they
read the same value.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Iterator

from .build import stated, stmt
from .model import _NOT_A_NEGATION, Sentence, Statement
from .subject import FUNCTION_WORDS, GAP, lemma, subject_of
from .typed import POSSESSIVES, typed_values

_NEGATION = re.compile(
    r"\b(?:not|never|no longer|without|no)\b|\bzero(?=\s+[a-z])|n't\b|\bdont\b|\bwont\b|\bcannot\b|\b(?:stop|quit|cease)\s+\w+ing\b|"
    r"\b(?:avoid|skip|exclude|omit|scratch)(?:s|ed|ing)?\b|\bdisabl(?:e|ed|ing)\b|\b(?:turn|switch|shut)(?:ed|ing|s)?\s+(?:\w+\s+){0,3}?off\b"
)  # "no type hints", "zero debt", "stop sending the summary", "caching should be disabled": the clause's action is refused
_WHICH = ("name", "id", "attr")  # value types that can name the thing another value is about
_TYPE_LABELS = {"date": "date", "time": "time", "name": "name", "id": "value"}


def _label(subject: tuple[str, ...], type_: str) -> str:
    words = [w.lstrip("^") for w in subject[:3]]
    if words:
        return " ".join(words)
    family, _, unit = type_.partition(":")
    return _TYPE_LABELS.get(family) or (f"number of {unit}s" if family == "count" else unit or family)


def typed_statements(s: Sentence) -> Iterator[Statement]:
    values = typed_values(s.text)
    # other amounts in the clause are other values; a name there says what this one is about ("the NDA")
    spans = [(t.start, t.end) for t in values if t.type.split(":", 1)[0] not in _WHICH]
    for t in values:
        # whose it is goes in the subject; a date in the past is still a fact ("I was born 12 April 1989")
        if not stated(s, t.start, addressed=False, own=False, past=t.type not in ("date", "time")):
            continue
        c0, c1 = s.clause(t.start)
        others = [span for span in spans if span != (t.start, t.end) and c0 <= span[0] < c1]
        if t.type.startswith("attr:") and others:
            continue  # "the blue team has 9 members": the amount is the value, the colour says which team
        role = _role_beside(s, t.start, t.end) if t.type == "name" else None
        subject = role or subject_of(s, t.start, t.end, others)
        if t.type.startswith("attr:") and _OF_IT.search(s.lower, c0, c1) and not _NAMED_THING.search(s.lower, c0, c1):
            subject = (*subject, GAP, t.type[5:])  # "make it sound casual" is about the tone: "keep the tone formal"
        yield stmt(s, f"v.{t.type}", "value", t.value, _label(subject, t.type), t.start, t.end, subject=subject)


_OF_IT = re.compile(r"\b(?:it|it's|this|that)\b")  # an attribute of the thing being worked on, named before
_NAMED_THING = re.compile(r"\b(?:the|my|our|your|his|her|their|a|an)\s+[a-z]")
_WHOSE = rf"(?P<whose>{POSSESSIVES})"
_ROLE_AFTER = re.compile(rf"\s*,\s*{_WHOSE}\s+(?P<np>[A-Za-z][\w' -]{{1,40}}?)\s*(?:[,.;!?]|$)")
_ROLE_BEFORE = re.compile(rf"\b(?P<whose>{POSSESSIVES}|[Tt]he)\s+(?P<np>(?:[a-z][\w'-]*\s+){{0,3}}[A-Za-z][\w'-]*)\s*,\s*$")
_ROLE_APPOSED = re.compile(rf"(?<!\bis )(?<!\bwas )(?<!'s )\b{_WHOSE}\s+(?P<np>(?:[a-z][\w-]*\s+){{0,2}}[a-z][\w-]*)\s+$")  # "my manager Tom"
_AS_ROLE = re.compile(r"\s+as\b")
_CLAUSE_END = re.compile(r"\s*(?:[,.;!?—–]|$)")
_ROLE_NP = r"(?:[A-Za-z][\w-]*\s+){0,3}[A-Za-z][\w-]*(?:\s+(?:for|of|on)\s+(?:the\s+|our\s+|this\s+)?(?:[A-Za-z][\w-]*\s+){0,2}[A-Za-z][\w-]*)?"
_ROLE_IS = re.compile(rf"\b(?P<whose>{POSSESSIVES}|[Tt]he)\s+(?P<np>{_ROLE_NP})\s+(?:is|was|will be)\s+$")
# "Kenji is the hiring manager", "with Sofia since she's the hiring manager": a name, then the role it holds
_IS_ROLE = re.compile(
    rf"\s*(?:(?:,|since|because|as|—|–)\s*(?:she|he|they)|)(?:'s|’s|\s+is|\s+are|\s+was)\s+(?P<whose>{POSSESSIVES}|the)\s+(?P<np>{_ROLE_NP}){_CLAUSE_END.pattern}")


def _role_beside(s: Sentence, start: int, end: int) -> tuple[str, ...] | None:
    """A person named in apposition to their role ("Tom, my manager", "his homeroom teacher,
    Mr. O'Brien"): the role is what the name is the value of, as in "my landlord is Gerald"; a
    role of his, hers or theirs belongs to someone else, as in "my son's teacher is Mrs. Patel". A
    name said as a role's value ("my manager is Priya") or set right after it ("email my manager Tom")
    is read the same way."""
    m = _ROLE_AFTER.match(s.text, end)
    for pattern in (_ROLE_BEFORE, _ROLE_IS, _ROLE_APPOSED):  # "his teacher, Mr. O'Brien", "my manager is Priya", "my manager Tom"
        m = m or pattern.search(s.text, 0, start)  # each ends with "$": it ends where the name starts
    m = m or _IS_ROLE.match(s.text, end)  # "Kenji is the hiring manager": only where no role comes before
    if not m or (m.re is _ROLE_APPOSED and (FUNCTION_WORDS & set(m.group("np").lower().split()) or _AS_ROLE.match(s.text, end))):
        return None  # "my office in Seattle", "list my brother Robert as the executor": the role is elsewhere
    if m.re is _IS_ROLE and re.search(r"est\b|^one\b", m.group("np").split()[0]):
        return None  # "Tom is the best": a judgement, not a role
    if m.re is _ROLE_IS and m.group("whose").lower() == "the" and not _CLAUSE_END.match(s.text, end):
        return None  # "the plumber is Dave from Hanley's": the clause says more than the role
    role = tuple(lemma(w) for w in m.group("np").split() if w.lower() not in _NOT_ROLE and w.lower() not in FUNCTION_WORDS)
    if not role:
        return None  # "her name is Harriet": a name, no role
    whose = ("@other",) if (m.group("whose") or "").lower() in ("his", "her", "their") else ()  # "his teacher" is not the user's
    return (*whose, *role)


_NOT_ROLE = {"the", "a", "an", "new", "old", "own", "name", "full", "first", "last"}


_NEGATORS = {"don't", "dont", "do", "doesn't", "won't", "wont", "can't", "cannot", "never", "shouldn't", "mustn't", "isn't",
             "aren't", "without", "no", "not", "any", "stop", "quit", "cease", "enable", "enabled", "disable", "disabled",
             "turn", "switch", "shut", "off", "avoid", "skip", "exclude", "omit", "scratch", "zero"}  # the polarity, not the object


def clause_statements(s: Sentence) -> Iterator[Statement]:
    """A clause with no value of its own, as a whole, with its polarity: "Include the test files"
    and "do not include the test files" say opposite things about one action."""
    starts = [0] + [b for _, b in s.boundaries]
    for c0 in sorted(set(starts)):
        c1 = s.clause(c0)[1]
        if c1 - c0 < 4 or not stated(s, c0, addressed=False, own=False):
            continue
        subject = tuple(w for w in subject_of(s, c0, c0, action=True) if w not in _NEGATORS)
        content = sorted({w.lstrip("^") for w in subject if w != "|" and not w.startswith("@")})
        if len(content) < 1:
            continue
        clause = _NOT_A_NEGATION.sub(" ", s.lower[c0:c1])
        negated = bool(_NEGATION.search(clause))
        st = stmt(s, "v.act", "preference", " ".join(content), " ".join(content[:3]), c0, c1, negated=negated,
                  substitutable=False, subject=subject)
        if negated and not _PENDING.search(s.lower):
            st = replace(st, **_refused(clause))
        yield st


_DETERMINER_NEGATION = re.compile(
    r"(?:\b(?:no|any|without|zero)|\bany(?:where|thing|one|body)\s+(?:near|around|close to|with|like|from)(?:\s+the)?|"
    r"(?:\bnot|n't|\bnever)\s+[a-z]+\s+(?:(?:for|to|on|in|with|about)\s+)?an?)\s+"
    r"(?P<np>[a-z][\w'-]*(?:[\s/]+[a-z][\w'-]*){0,2})"
)  # "no smart locks", "not requiring a degree": a determiner after a negated verb opens its object;
# "anywhere near bars", "anything with nuts": what a negated "any-" word is near or with
_COMPLEMENT = re.compile(
    r"\s*(?:for|to)\s+(?:(?:the|my|our|his|her|their|this|that)\s+)?(?P<np>[a-z][\w'-]*(?:\s+[a-z][\w'-]*)?)"
)
_UNIVERSAL = {"anything", "anywhere", "everything", "anyone", "everyone", "all", "any", "me", "us", "now"}
_PENDING = re.compile(r"\byet\b")  # "I haven't picked a venue yet": still open, a later value fills it in


def _refused(clause: str) -> dict[str, tuple[str, ...]]:
    """The noun phrase after "no", "any" or "without", or after a negated verb and its article
    ("no smart locks in the house" → smart lock; "not requiring a degree" → degree): what follows
    a determiner is a thing, so one word of it names the object, where a clause's words would need
    two (a lone shared verb is not one action). With it, what the thing is for when a preposition
    follows ("no tip for the taxi" → taxi), which tells one tip from another."""
    m = _DETERMINER_NEGATION.search(clause)
    if not m:
        return {}
    out: list[str] = []
    end = m.start("np")
    for w in re.finditer(r"[^\s/]+", m.group("np")):
        if w.group() in FUNCTION_WORDS:
            break
        out.append(lemma(w.group()))
        end = m.start("np") + w.end()
    after = _COMPLEMENT.match(clause, end)
    which = [lemma(w) for w in after.group("np").split() if w not in FUNCTION_WORDS] if after else []
    return {"refused": tuple(out), "refused_for": tuple(w for w in which if w not in _UNIVERSAL)}
