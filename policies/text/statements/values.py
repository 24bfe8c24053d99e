"""Extraction rules for values: amounts, counts, dates, times, booking names, contact details.

Values are keyed by what they measure, so that only like compares with like: an amount by
its scope and bound ("budget per night, maximum" never clashes with "total budget"), a count
by its noun and place ("3 nights in Rome" vs "2 nights in Venice"), a date or time by its event
("departure" vs "return").
"""

from __future__ import annotations

import re
from typing import Iterator

from .bounds import AT_LEAST, AT_MOST
from .build import name_at, place_at, scoped, stated, stmt
from .lexicon import DATE_AFTER_WEEKDAY, MONTH, MONTHS, NUMBER, WEEKDAY, WEEKDAY_OF_DATE, number_value
from .model import Sentence, Statement
from .subject import FUNCTION_WORDS

# ----------------------------------------------------------------------------- amounts

_AMOUNT = re.compile(
    r"(?P<c1>[$€£¥])\s?(?P<n1>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)\s?(?P<k1>k\b)?|"
    r"\b(?P<n2>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)\s?(?P<k2>k\b)?\s?(?P<c2>dollars|bucks|euros?|pounds|usd|eur|gbp|quid)\b"
)
_CURRENCIES = {"$": "usd", "dollars": "usd", "bucks": "usd", "usd": "usd", "€": "eur", "euro": "eur", "euros": "eur",
               "eur": "eur", "£": "gbp", "pounds": "gbp", "gbp": "gbp", "quid": "gbp", "¥": "jpy"}
_SCOPE_AFTER = re.compile(
    r"\s*(?:/\s*|per\s+|a\s+|an\s+|each\s+|every\s+|for\s+(?:the\s+|a\s+|one\s+|each\s+|1\s+)?(?:whole\s+|entire\s+|full\s+)?)"
    r"(night|day|week|month|year|person|head|trip|stay|room|ticket)s?\b"
)
_SCOPE_WORDS = {"night": "night", "room": "night", "day": "day", "week": "week", "month": "month", "year": "year",
                "person": "person", "head": "person", "trip": "total", "stay": "total", "ticket": "ticket"}
_SCOPE_NEAR = re.compile(r"\b(nightly|daily|weekly|monthly|yearly|annual(?:ly)?|in total|total|overall|altogether|all[- ]in)\b")
_NEAR_WORDS = {"nightly": "night", "daily": "day", "weekly": "week", "monthly": "month", "yearly": "year", "annual": "year",
               "annually": "year"}
_BOUNDS = re.compile(
    rf"\b(?P<max>{AT_MOST}|up to|within|cap(?:ped)? at|not (?:over|above)|budget|spend|afford|pay|limit)\b"
    rf"|\b(?P<min>{AT_LEAST}|starting at)\b"
)
_KEYED_AMOUNT = re.compile(r"\b(?:(?P<max>budget|max(?:imum)?|limit)|(?P<min>min(?:imum)?))\s*:\s*$")
_INCOME = re.compile(r"\b(?:earn|salary|income|paid)\b|\bmake\b(?!\s+(?:it|the|a|an|my|our|this|that|sure)\b)")  # not "make the budget $1,200"


def _scope(s: Sentence, end: int, c0: int, c1: int) -> str:
    after = _SCOPE_AFTER.match(s.lower, end)
    if after:
        return _SCOPE_WORDS[after.group(1)]
    near = _SCOPE_NEAR.search(s.lower[c0:c1])
    if near:
        return _NEAR_WORDS.get(near.group(1), "total")
    return "total"


def amounts(s: Sentence) -> Iterator[Statement]:
    for m in _AMOUNT.finditer(s.lower):
        if not stated(s, m.start(), addressed=False):
            continue
        c0, c1 = s.clause(m.start())
        bounds = list(_BOUNDS.finditer(s.lower[c0:m.start()]))
        key = _KEYED_AMOUNT.search(s.lower[: m.start()])
        if key and not bounds:  # "Budget: $1,000"
            bounds = [key]
        if not bounds:
            continue  # an amount with no spending word ("that's $1,400") is arithmetic, not a budget
        bound = "min" if bounds[-1].group("min") else "max"
        what = "income" if _INCOME.search(s.lower[c0:c1]) else "budget"
        raw = (m.group("n1") or m.group("n2")).replace(",", "")
        number = float(raw) * (1000 if (m.group("k1") or m.group("k2")) else 1)
        currency = _CURRENCIES[m.group("c1") or m.group("c2")]
        scope = _scope(s, m.end(), c0, c1)
        label = f"{what} {'in total' if scope == 'total' else 'per ' + scope} ({'maximum' if bound == 'max' else 'minimum'})"
        value = f"{number:g}"
        yield stmt(s, f"amount.{what}.{scope}.{bound}.{currency}", "value", value, label, m.start(), m.end())


# ----------------------------------------------------------------------------- counts

_COUNT_NOUNS = {
    "people": "people", "persons": "people", "person": "people", "travellers": "people", "travelers": "people",
    "traveller": "people", "traveler": "people", "passengers": "people", "passenger": "people", "guests": "people",
    "guest": "people", "pax": "people", "adults": "adults", "adult": "adults", "kids": "children", "kid": "children",
    "children": "children", "child": "children", "infants": "children", "babies": "children", "rooms": "rooms",
    "room": "rooms", "nights": "nights", "night": "nights", "tickets": "tickets", "ticket": "tickets", "seats": "tickets",
    "bags": "bags", "bag": "bags", "suitcases": "bags", "suitcase": "bags", "beds": "beds", "bed": "beds", "days": "days",
}


def count_noun(word: str) -> str | None:
    """The count slot's noun for a word ("guests" → "people"); None for a word no count rule reads."""
    return _COUNT_NOUNS.get(word)


_NOUN = "(" + "|".join(sorted(_COUNT_NOUNS, key=len, reverse=True)) + ")"
_COUNTS = (
    re.compile(rf"\b(?<![$€£#])({NUMBER})\s+{_NOUN}\b(?!\s+(?:cancel\w*|dropped|left|can't|cannot|couldn't|won't|aren't|are not|ago|later))"),
    re.compile(rf"\b(?:party|group|table)\s+(?:of|for)\s+({NUMBER})\b()"),
    re.compile(rf"\b({NUMBER})\s+of\s+us\b()"),
    re.compile(rf"\b(?:we(?:'re| are)|we will be|we'll be|there (?:are|will be|'ll be))\s+(?:a group of\s+|a party of\s+)?({NUMBER})\b()"
               rf"(?!\s*(?:{_NOUN[1:-1]}|more|extra|additional|other|days?|weeks?|hours?|minutes?|years?|am|pm|:|%|\w+ old)\b)"),
    re.compile(rf"\b(?:people|guests|travell?ers|passengers|adults|children|kids|rooms|nights)\s*:\s*({NUMBER})\b()"),
)
_ALONE = re.compile(r"\b(?:travell?ing|going|flying|coming|visiting)\s+(alone|solo|by myself|on my own)\b|\b(just me)\b|\b(solo) (?:trip|travell?er)\b")
_NOT_A_COUNT = re.compile(r"(?:room|seat|flight|gate|terminal|row|top|in|within|after|every|last|next|first|step|number|no\.?)\s+$")


def counts(s: Sentence) -> Iterator[Statement]:
    for i, pattern in enumerate(_COUNTS):
        for m in pattern.finditer(s.lower):
            if _NOT_A_COUNT.search(s.lower[max(0, m.start() - 12):m.start()]) or not stated(s, m.start(), addressed=False, own=False):
                continue
            number = number_value(m.group(1))
            noun = m.group(2) if i == 0 else (s.lower[m.start():m.end()].split(":")[0].strip() if i == 4 else "people")
            noun = _COUNT_NOUNS.get(noun, "people")
            if noun == "days" and not re.search(r"\bfor\s+$", s.lower[max(0, m.start() - 5):m.start()]):
                continue  # "in 3 days" is when, not how long
            if number is None:
                continue
            yield _count(s, noun, number, m.start(1), m.end(1), m.end())
    for m in _ALONE.finditer(s.lower):
        if stated(s, m.start(), own=False):
            group = m.lastindex or 0
            yield _count(s, "people", 1, m.start(group), m.end(group), m.end(), substitutable=False)




def _count(s: Sentence, noun: str, number: int, vstart: int, vend: int, end: int, substitutable: bool = True) -> Statement:
    """A count, qualified by the place it is for ("3 nights in Rome"); what else it is for is in its subject."""
    slot = scoped(f"count.{noun}", s)
    where = re.match(r"\s+(?:in|at)\s+", s.lower[end:])
    place = place_at(s, end + where.end()) if where else None
    if place:
        slot = f"{slot}>{place[0]}"
    label = "number of people" if noun == "people" else f"number of {noun}"
    return stmt(s, slot, "value", str(number), label, vstart, vend, substitutable=substitutable)


# ----------------------------------------------------------------------------- dates and times

_EVENTS = (
    ("departure", r"depart(?:ing|ure|s)?|leav(?:e|ing|es)|fly(?:ing)? out|outbound|set(?:ting)? off|head(?:ing)? out|"
                  r"flight|fly(?:ing)?|travell?(?:ing)?|trip (?:starts|begins)|start(?:ing)? (?:date|on)"),
    ("return", r"return(?:ing|s)?|com(?:e|ing) back|fly(?:ing)? back|back home|get(?:ting)? back|head(?:ing)? back|inbound|trip ends"),
    ("arrival", r"arriv(?:e|al|ing|es)|land(?:s|ing)?|get(?:ting)? there"),
    ("check-in", r"check(?:ing)?[- ]?in"),
    ("check-out", r"check(?:ing)?[- ]?out"),
    ("pickup", r"pick(?:ing)?[- ]?(?:me |us )?up|pickup"),
    ("", r"meeting|appointment|interview|wedding|party|conference|dinner|lunch|breakfast|brunch|reservation|deadline|"
         r"birthday|call|exam|surgery|concert|show|tour|event|ceremony|match|game|presentation|delivery|drop[- ]?off|"
         r"alarm|wake[- ]?up|taxi|cab|ride|train|bus|ferry|class|table|booking"),
)
_EVENT = re.compile("|".join(f"(?P<e{i}>\\b(?:{p})\\b)" for i, (_, p) in enumerate(_EVENTS)))


def _event(s: Sentence, start: int, end: int, values: list[re.Match[str]] = ()) -> str:
    """The event a date or time belongs to: the nearest cue before it, else the first one after it;
    none when that cue is another clause's and a value of that clause's lies between them ("my
    departure is aug 10, can you find me a hotel for the night of the 9th": the 9th is the hotel's)."""
    before = [m for m in _EVENT.finditer(s.lower) if m.end() <= start]
    after = [m for m in _EVENT.finditer(s.lower) if m.start() >= end]
    m = before[-1] if before else after[0] if after else None
    if m is None or _spent(s, m, start, end, values):
        return ""
    i = int(m.lastgroup[1:])  # type: ignore[index]
    name = _EVENTS[i][0] or m.group(0)
    return re.sub(r"[\s-]+", "-", name)


def _spent(s: Sentence, cue: re.Match[str], start: int, end: int, values: list[re.Match[str]]) -> bool:
    own = s.clause(start)
    if s.clause(cue.start()) == own:
        return False
    a, b = (cue.end(), start) if cue.end() <= start else (end, cue.start())
    between = any(a <= v.start() and v.end() <= b and s.clause(v.start()) != own for v in values)
    rest = s.lower[own[0]:start] + " " + s.lower[end:own[1]]
    return between and len([w for w in re.findall(r"[a-z]+", rest) if w not in FUNCTION_WORDS]) >= 2


def _changed_event(s: Sentence) -> str:
    """ "Make it 7:30pm instead" changes an earlier value: the event is found in the conversation
    (clash_detect.inherit_qualifiers); "?" marks it as not yet known."""
    return "?" if s.changes else ""


_DATES = re.compile(
    rf"\b{WEEKDAY_OF_DATE}(?P<m1>{MONTH})\s+(?P<d1>\d{{1,2}})(?:st|nd|rd|th)?\b(?!\s*(?::|am|pm|%|\d))|"
    rf"\b{WEEKDAY_OF_DATE}(?:the\s+)?(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<m2>{MONTH})(?![a-z])|"
    rf"\b{WEEKDAY_OF_DATE}the\s+(?P<d3>\d{{1,2}})(?:st|nd|rd|th)\b(?!\s*centur)|"
    rf"\b(?P<y>\d{{4}})-(?P<m4>\d{{2}})-(?P<d4>\d{{2}})\b|"
    rf"\b(?:on|this|next|coming|by|until|till|before|for|is|be|to|from)\s+(?:(?P<q>this|next|coming)\s+)?(?P<wd>{WEEKDAY})\b(?!{DATE_AFTER_WEEKDAY})"
)


def _date_value(m: re.Match[str]) -> str:
    if m.group("wd"):
        return f"wd:{'next' if m.group('q') == 'next' else 'this'}:{m.group('wd')}"
    if m.group("y"):
        return f"m{int(m.group('m4'))}d{int(m.group('d4'))}"
    month = m.group("m1") or m.group("m2")
    day = m.group("d1") or m.group("d2") or m.group("d3")
    return f"m{MONTHS[month.rstrip('.')]}d{int(day)}" if month else f"d{int(day)}"


def dates(s: Sentence) -> Iterator[Statement]:
    found = list(_DATES.finditer(s.lower))
    for m in found:
        if m.group("m1") == "may" and not re.match(r"\s+\d", s.lower[m.end("m1"):]):
            continue
        if s.lower.startswith("'s", m.end()):
            continue  # "Friday's show" names the show, it does not date it
        event = _event(s, m.start(), m.end(), found) or _changed_event(s)
        if not event or not stated(s, m.start(), addressed=False):
            continue
        yield stmt(s, f"date.{event}", "value", _date_value(m), _event_label(event, "date"), m.start(), m.end())


_TIMES = re.compile(r"\b(\d{1,2})(?::(\d{2}))?\s*(am|pm|a\.m\.|p\.m\.)|\b(\d{1,2}):(\d{2})\b|\b(noon|midday|midnight)\b")


def _minutes(m: re.Match[str]) -> int | None:
    if m.group(6):
        return 0 if m.group(6) == "midnight" else 720
    hour = int(m.group(1) or m.group(4))
    minute = int(m.group(2) or m.group(5) or 0)
    if m.group(3):
        if hour > 12:
            return None
        hour = hour % 12 + (12 if m.group(3).startswith("p") else 0)
    return hour * 60 + minute if hour < 24 and minute < 60 else None


def times(s: Sentence) -> Iterator[Statement]:
    found = list(_TIMES.finditer(s.lower))
    for m in found:
        minutes = _minutes(m)
        event = _event(s, m.start(), m.end(), found) or _changed_event(s)
        if minutes is None or not event or not stated(s, m.start(), addressed=False):
            continue
        yield stmt(s, f"time.{event}", "value", f"{minutes // 60:02d}:{minutes % 60:02d}", _event_label(event, "time"),
                   m.start(), m.end())


def _event_label(event: str, what: str) -> str:
    return what if event == "?" else f"{event.replace('-', ' ')} {what}"


# ----------------------------------------------------------------------------- names and contact details

_BOOKING = re.compile(
    r"\b(?:reservation|booking|table|room|ticket|order)s?\b[^.]{0,30}?\bunder\s+(?:the\s+name\s+(?:of\s+)?)?|\bin the name of\s+"
)


def booking_name(s: Sentence) -> Iterator[Statement]:
    for m in _BOOKING.finditer(s.lower):
        found = name_at(s, m.end(), capitalised=True)
        if found and stated(s, m.start(), addressed=False, own=False, past=False):
            yield stmt(s, "booking.name", "value", found[0], "name on the booking", found[1], found[2])


_CONTACTS = (
    ("contact.email", "email address", re.compile(
        r"\b(?:(?:my|me|our)\b[^@,;]{0,40}?\b(?:e-?mail|address)\b|e-?mail me|reach me|contact me)[^@]{0,25}?\b([\w.+-]+@[\w-]+(?:\.[\w-]+)+)")),
    ("contact.phone", "phone number", re.compile(
        r"\b(?:phone|mobile|cell)(?:\s+number)?(?:\s+is|\s*:)\s*(?:now\s+)?(\+?\d[\d\s().-]{4,}\d)|\b(?:call|text) me (?:on|at)\s+(\+?\d[\d\s().-]{4,}\d)")),
    ("ref", "", re.compile(
        r"\bmy\s+(flight number|booking number|booking reference|confirmation number|confirmation code|reservation number|"
        r"passport number|room number|frequent flyer number|membership number|address|zip code|postal code|time ?zone)\s+"
        r"(?:is|:)\s+(?:now\s+)?([\w#+/-]+(?:\s+[\w#+/-]+){0,5}?)(?=\s*(?:$|[,;!?]|\.(?:\s|$)|\band\b|\bbut\b))")),
)


def contacts(s: Sentence) -> Iterator[Statement]:
    for slot, label, pattern in _CONTACTS:
        for m in pattern.finditer(s.lower):
            if not stated(s, m.start(), past=False):
                continue
            if slot == "ref":
                what = m.group(1)
                yield stmt(s, f"ref.{what.replace(' ', '-')}", "value", m.group(2).replace(" ", "").upper(), what, m.start(2), m.end(2))
                continue
            group = m.lastindex or 0
            raw = m.group(group).rstrip(".")
            value = re.sub(r"\D", "", raw) if slot == "contact.phone" else raw
            yield stmt(s, slot, "value", value, label, m.start(group), m.start(group) + len(raw))


VALUE_RULES = (amounts, counts, dates, times, booking_name, contacts)
