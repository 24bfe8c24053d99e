"""Shared pieces of the extraction rules: building a Statement, guards, places, names, scopes."""

from __future__ import annotations

import re

from .lexicon import KNOWN_PLACE_RE, NOT_PLACES, canonical_place
from .model import Kind, Sentence, Statement
from .subject import series_of, subject_of, topic_words

# a count that says how much of a listing to take ("the last 100 lines"): set anew for each run of a query
_WINDOW = re.compile(r"\b(?:last|first|top|latest|past|next|most recent)\s+$")


def stmt(
    s: Sentence,
    slot: str,
    kind: Kind,
    value: str,
    label: str,
    vstart: int,
    vend: int,
    *,
    display: str | None = None,
    negated: bool | None = None,
    substitutable: bool = True,
    subject: tuple[str, ...] | None = None,
) -> Statement:
    """A statement found at sentence-relative span [vstart, vend)."""
    return Statement(
        slot=slot,
        kind=kind,
        value=value,
        label=label,
        display=display if display is not None else s.text[vstart:vend],
        negated=s.negated(vstart, vend) if negated is None else negated,
        sentence=s.index,
        start=s.start,
        end=s.end,
        vstart=s.start + vstart,
        vend=s.start + vend,
        changes=s.changes,
        substitutable=substitutable,
        subject=subject_of(s, vstart, vend) if subject is None else subject,
        correction=s.correction,
        step=s.new_step and not s.correction,
        request=s.imperative,
        replaces=s.replaces,
        adds=s.adds,
        context=topic_words(s.text),
        window=not s.first_person and bool(_WINDOW.search(s.lower, max(0, vstart - 14), vstart)),  # "my last 3 jobs": a fact
        series=series_of(s.lower, (0, 0) if slot == "v.act" else (vstart, vend)),  # a clause is no ordinal value
    )


def stated(
    s: Sentence,
    pos: int,
    *,
    addressed: bool = True,
    own: bool = True,
    past: bool = True,
    future: bool = False,
) -> bool:
    """Whether a value at `pos` is something the user states for themselves, now.

    Questions, hypotheticals ("if I were rich"), the past ("I used to live in Rome"), other
    people ("my wife prefers the window") and, where asked, plans ("next week") are not.
    """
    if s.question_at(pos) or s.hypothetical(pos):
        return False
    if addressed and not s.addressed:
        return False
    if own and s.third_party_at(pos):
        return False
    if past and s.past(pos):
        return False
    return not (future and s.future(pos))


# ----------------------------------------------------------------------------- places

_CAPITALISED_PLACE = re.compile(
    r"(?:[Tt]he\s+)?[A-Z][\w'.-]*(?:\s+(?:de|del|da|do|of|upon|on|la|le|du|am)?\s*[A-Z][\w'.-]*){0,3}"
)


def place_at(s: Sentence, pos: int) -> tuple[str, int, int] | None:
    """A place name starting at sentence-relative `pos`: (canonical, start, end)."""
    known = KNOWN_PLACE_RE.match(s.text, pos)
    if known:
        return canonical_place(known.group(1)), known.start(1), known.end(1)
    cap = _CAPITALISED_PLACE.match(s.text, pos)
    if not cap:
        return None
    words = cap.group(0).rstrip(".").split()
    while words and words[-1].lower().strip(".,") in NOT_PLACES:
        words.pop()
    if not words or words[0].lower() in NOT_PLACES or (words[0].lower() == "the" and len(words) == 1):
        return None
    literal = " ".join(words)
    return canonical_place(literal), pos, pos + len(literal)


# ----------------------------------------------------------------------------- names

_NAME = re.compile(r"[A-Za-z][\w'-]*(?:\s+[A-Z][\w'-]*){0,2}")
_NOT_NAMES = {
    "not", "the", "a", "an", "back", "later", "tomorrow", "now", "soon", "again", "anytime", "whenever",
    "when", "if", "please", "asap", "actually", "still", "on", "at", "in", "and", "but", "so", "by",
}


def name_at(s: Sentence, pos: int, *, capitalised: bool) -> tuple[str, int, int] | None:
    m = _NAME.match(s.text, pos)
    if not m:
        return None
    words = m.group(0).split()
    if words[0].lower() in _NOT_NAMES or (capitalised and not words[0][0].isupper()):
        return None
    literal = " ".join(words)
    return literal.lower(), pos, pos + len(literal)


# ----------------------------------------------------------------------------- scopes

_SCOPES: tuple[tuple[re.Pattern[str], dict[str, str] | None], ...] = (
    (re.compile(r"\b(?:on )?the way (back|there|home)\b"), {"back": "return", "home": "return", "there": "outbound"}),
    (re.compile(r"\b(?:the|my|our|a)\s+(?:flight|trip|journey|leg|ride|drive)\s+(back|there|out|home)\b"),
     {"back": "return", "home": "return", "there": "outbound", "out": "outbound"}),
    (re.compile(r"\b(outbound|return|inbound|onward|connecting)\s+(?:flight|leg|journey|trip)s?\b"),
     {"inbound": "return", "onward": "outbound"}),
    (re.compile(r"\b(first|second|third|last|final)\s+(?:leg|flight)\b"), {"final": "last"}),
    (re.compile(r"\bfor the (first|last|final|second|third|remaining|other)\b(?:\s+\w+)?\s+(?:nights?|days?|weeks?|part|half|stop)\b"),
     {"final": "last"}),
    (re.compile(r"\bfor (?:the )?(short|long)(?:er)?[- ](?:trips?|distances?|journeys?|flights?|hauls?|routes?)\b"), None),
)


def scoped(slot: str, s: Sentence) -> str:
    """Qualify a slot by the part of the trip the sentence is about ("return flight", "last night")."""
    for pattern, names in _SCOPES:
        m = pattern.search(s.lower)
        if m:
            word = m.group(1)
            return f"{slot}@{(names or {}).get(word, word)}"
    return slot
