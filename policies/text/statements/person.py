"""Rules for facts about the user: where they are, their name, age, job and employer."""

from __future__ import annotations

import re
from typing import Iterator

from .build import name_at, place_at, stated, stmt
from .lexicon import PROFESSIONS
from .model import Sentence, Statement

# ----------------------------------------------------------------------------- where the user is

_NOT = r"(?:(?:not|no longer|n't)\s+)?"
_LOCATIONS = (
    ("location.current", "current location", True, re.compile(
        rf"\b(?:i'm|i am|im|we're|we are)\s+{_NOT}(?:(?:currently|now|still|right now|at the moment|here|presently|already|"
        rf"actually|staying|located|at home|at work|back home|back)\s+)*in\s+|\b(?:i|we)(?:'ve| have)?\s+(?:just\s+|now\s+|finally\s+)?(?:arrived|landed)\s+in\s+|"
        rf"\b(?:i'm|i am|we're|we are)\s+(?:writing|messaging|texting)\s+(?:you\s+)?from\s+|^\W*(?:currently|still|now|here)\s+in\s+|"
        rf"\b(?:my\s+)?(?:current\s+)?location(?:\s+is|\s*:)\s*")),
    ("location.home", "home", True, re.compile(
        rf"\b(?:i|we)\s+(?:(?:don't|do not|no longer|currently|now|still|actually|also)\s+)*(?:live|reside)\s+in\s+|"
        rf"\b(?:i'm|i am|we're|we are)\s+{_NOT}(?:currently\s+|now\s+)?based\s+(?:in|out of)\s+|"
        rf"\bmy\s+home\s+is\s+(?:now\s+)?in\s+|\bhome\s*:\s*")),
    ("location.home", "home", False, re.compile(r"\b(?:i|we)(?:'ve| have)?\s+(?:just\s+|recently\s+|finally\s+)?moved\s+to\s+")),
    ("location.origin", "where the user is from", True, re.compile(
        r"\b(?:i'm|i am|im|we're|we are)\s+(?:originally\s+)?from\s+|\b(?:i|we)\s+(?:originally\s+)?come\s+from\s+|"
        r"\bmy\s+hometown\s+is\s+")),
    ("location.origin", "where the user is from", False, re.compile(r"\bi\s+was\s+born\s+in\s+")),
)


def location(s: Sentence) -> Iterator[Statement]:
    taken: set[int] = set()
    for slot, label, check_past, pattern in _LOCATIONS:
        for m in pattern.finditer(s.lower):
            place = place_at(s, m.end())
            if not place or place[1] in taken:
                continue
            if not stated(s, m.start(), past=check_past, future=slot != "location.origin"):
                continue
            taken.add(place[1])
            yield stmt(s, slot, "fact", place[0], label, place[1], place[2])


# ----------------------------------------------------------------------------- who the user is

_NAMES = (
    (False, re.compile(r"\bmy name(?:'s| is)\s+(?:(?:actually|now|still|really)\s+)?")),
    (True, re.compile(r"\bcall me\s+|\b(?:hi|hello|hey)\W+(?:(?:i'm|i am|this is)\s+)|\b(?:full |first )?name\s*:\s*")),
)


def name(s: Sentence) -> Iterator[Statement]:
    for capitalised, pattern in _NAMES:
        for m in pattern.finditer(s.lower):
            found = name_at(s, m.end(), capitalised=capitalised)
            if found and stated(s, m.start(), past=False):
                yield stmt(s, "user.name", "fact", found[0], "name", found[1], found[2])


_AGES = re.compile(
    r"\b(?:i'm|i am|im)\s+(?:(?:now|actually|only|already|just)\s+)?(\d{1,3})(?:\s*(?:years?|yrs?)(?:\s*old)?\b|\s*y/?o\b|"
    r"(?=\s*(?:[,.!;]|$|\band\b|\bbut\b|\bso\b|\bnow\b)))|\bmy age is\s+(\d{1,3})\b|\b(?:i'm|i am)\s+an?\s+(\d{1,3})[- ]year[- ]old\b|"
    r"\bage\s*:\s*(\d{1,3})\b"
)


def age(s: Sentence) -> Iterator[Statement]:
    for m in _AGES.finditer(s.lower):
        group = m.lastindex or 0
        years = int(m.group(group))
        if 5 <= years <= 120 and stated(s, m.start(), past=False):
            yield stmt(s, "user.age", "fact", str(years), "age", m.start(group), m.end(group))


_PROFESSION = "(" + "|".join(sorted(PROFESSIONS, key=len, reverse=True)) + ")"
_JOBS = re.compile(
    rf"\bi\s+(?:currently\s+|now\s+|still\s+)?work\s+as\s+(?:an?\s+)?([a-z][a-z -]{{1,30}}?)(?=\s*(?:$|[,.;!?]|\b(?:at|for|in|and|but|since|so|now)\b))|"
    rf"\bmy\s+(?:job|occupation|profession)\s+is\s+(?:an?\s+)?([a-z][a-z -]{{1,30}}?)(?=\s*(?:$|[,.;!?]|\b(?:at|for|in|and|but|now)\b))|"
    rf"\b(?:i'm|i am)\s+(?:(?:not|no longer|now|actually|still)\s+)*(?:an?\s+)(?:\w+\s+)?{_PROFESSION}\b"
)
_EMPLOYER = re.compile(r"\bi\s+(?:(?:currently|now|still|actually|also|don't|do not|no longer)\s+)*work\s+(?:at|for)\s+|\bmy\s+(?:employer|company)\s+is\s+")
_ORG = re.compile(r"[A-Z][\w&.'-]*(?:\s+[A-Z][\w&.'-]*){0,3}")


def work(s: Sentence) -> Iterator[Statement]:
    for m in _JOBS.finditer(s.lower):
        group = m.lastindex or 0
        if stated(s, m.start()):
            yield stmt(s, "user.job", "fact", m.group(group).strip(), "occupation", m.start(group), m.start(group) + len(m.group(group).strip()))
    for m in _EMPLOYER.finditer(s.lower):
        org = _ORG.match(s.text, m.end())
        if org and stated(s, m.start()):
            literal = org.group(0).rstrip(".")
            yield stmt(s, "user.employer", "fact", literal.lower(), "employer", org.start(), org.start() + len(literal))
