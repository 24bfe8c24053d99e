"""Typed values in a sentence: money, quantities with units, counts, dates, times, names, identifiers.

Each value comes with a type that says what it can be compared with ("qty:duration" compares
with "qty:duration" whatever the unit) and a canonical form that makes equal values equal
("2 hours" and "120 minutes" are both 7200 s; "$5,000" and "5k dollars" are both 5000 usd).
Nothing here knows a domain: units and number formats are the vocabulary, not sentences.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from ..slots import SCALES, SPELLED_NUMBER, spelled_number
from ..units import PHRASES
from ..units import UNITS as TABLE
from ..words import FUNCTION_WORDS
from .attributes import attributes
from .lexicon import DATE_AFTER_WEEKDAY, MONTH, MONTHS, NUMBER_WORDS, WEEKDAY, WEEKDAY_OF_DATE, WEEKDAYS


@dataclass(frozen=True)
class Typed:
    type: str  # "money:usd", "qty:duration", "count:epoch", "date", "time", "name", "id"
    value: str  # canonical and comparable
    start: int  # span in the sentence text
    end: int


_NUM = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
_SCALE = {**SCALES, "k": 1e3}
_THOUSANDS = r"(?<!\b401)k(?![\w])"  # "50k"; a 401k is a pension plan
# an amount in digits, scaled ("50k", "2.5 million"), or in words ("two thousand", "a dozen")
_AMOUNT = rf"(?:{_NUM}(?:{_THOUSANDS}|\s+(?:hundred|thousand|million|billion)\b)?|{SPELLED_NUMBER}|a dozen)"
_MONEY = re.compile(
    rf"(?P<c1>[$€£¥])\s?(?P<n1>{_NUM})\s?(?P<k1>k\b)?|"
    rf"\b(?P<n2>{_NUM})\s?(?P<k2>k\b)?\s?(?P<c2>dollars?|bucks|euros?|pounds|usd|eur|gbp|quid)\b", re.I)
_CURRENCY = {"$": "usd", "dollar": "usd", "dollars": "usd", "bucks": "usd", "usd": "usd", "€": "eur", "euro": "eur",
             "euros": "eur", "eur": "eur", "£": "gbp", "pounds": "gbp", "gbp": "gbp", "quid": "gbp", "¥": "jpy"}

# Units from the shared table, less what reads as a word after a number ("3 in stock", "2 t-shirts")
# and currencies (money is read above, with its own symbols)
_AMBIGUOUS = {"in", "t", "l", "v", "w", "ha", "$", "€", "£", "usd", "eur", "gbp", "dollar", "dollars", "euro", "euros"}
UNITS = {u: dim for u, dim in TABLE.items() if u not in _AMBIGUOUS}
_BINARY = {"Ki": "kib", "Mi": "mib", "Gi": "gib", "Ti": "tib"}  # Kubernetes quantities: "512Mi" is not 512 miles
_UNIT = "|".join(sorted((re.escape(u) for u in [*UNITS, *PHRASES, *_BINARY]), key=len, reverse=True))
_QUANTITY = re.compile(rf"\b(?P<n>{_AMOUNT}|an?)(?:\s?-\s?|\s?|\s+(?:full|whole|extra|additional)\s+)(?P<u>{_UNIT})(?![\w])", re.I)
_COUNT = re.compile(rf"\b(?P<n>{_AMOUNT})\s+(?P<noun>[a-z][a-z-]{{2,}}s)\b")
_DATE = re.compile(
    rf"\b{WEEKDAY_OF_DATE}(?P<m1>{MONTH})\s+(?P<d1>\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s+(?P<y1>\d{{4}})\b)?(?!\s*(?::|am|pm|%|\d))|"
    rf"\b{WEEKDAY_OF_DATE}(?:the\s+)?(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<m2>{MONTH})(?![a-z])(?:,?\s+(?P<y2>\d{{4}})\b)?|"
    rf"\b{WEEKDAY_OF_DATE}the\s+(?P<d3>\d{{1,2}})(?:st|nd|rd|th)\b|\b(?P<y>\d{{4}})-(?P<m4>\d{{2}})-(?P<d4>\d{{2}})\b|"
    rf"\b(?P<wd>{WEEKDAY})\b(?!{DATE_AFTER_WEEKDAY})", re.I)
_TIME = re.compile(r"\b(\d{1,2})(?::(\d{2}))?\s*(am|pm|a\.m\.|p\.m\.)|\b(\d{1,2}):(\d{2})\b|\b(noon|midday|midnight)\b", re.I)
_IDENT = re.compile(r"\b(?=[\w.-]*\d)(?=[\w.-]*[a-z])[a-z][\w.-]*[a-z0-9]\b|\b\d+[a-jl-z]\b|\b401k\b|\b\d+\.\d+(?:\.\d+)*\b", re.I)
_NAME = re.compile(r"(?<![\w'’.-])(?:Dr\.\s+|Mr\.\s+|Ms\.\s+|Mrs\.\s+)?[A-Z][\w'’.-]*(?:\s+(?:d'|de\s+|van\s+|von\s+)?[A-Z][\w'’-]*)*"
                   r"(?:\s+\d+(?:\.\d+)*)?")
_NOT_NAMES = {"i", "i'm", "i'd", "i'll", "i've", "ok", "okay"} | set(MONTHS) | set(WEEKDAYS)
_NAME_STOP = re.compile(r"\s*(?:$|[,.;:!?)—–]|\b(?:for|in|at|on|to|by|from|with|and|or|but|not|instead|rather|please|as|"
                        r"now|then|too|again|after|before|because|since|so|if|of|is|are|was|will|should)\b)")


def number(raw: str) -> float | None:
    raw = raw.lower().replace(",", "")
    if raw in ("a", "an"):
        return 1.0
    if raw in NUMBER_WORDS:
        return float(NUMBER_WORDS[raw])
    scaled = re.fullmatch(r"([\d.]+)\s*(k|hundred|thousand|million|billion)?", raw)
    if scaled is None:
        return spelled_number(raw)
    try:
        return float(scaled.group(1)) * _SCALE.get(scaled.group(2) or "", 1.0)
    except ValueError:
        return None


# "Kenji is the hiring manager": a sentence's first word is a name when the role it holds follows
_NAMED_FIRST = re.compile(r"\W*[A-Z][a-z]+\s+(?:is|was)\s+(?:the|our|my)\s+(?![a-z]+est\b)[a-z]")


def typed_values(text: str) -> list[Typed]:
    """Every typed value in `text`, longest first where two overlap (a date is not also a count)."""
    found = _money(text) + _offsets(text) + _quantities(text) + _dates(text) + _months(text) + _years(text) + _times(text) + _attributes(text) + _names(text) + _counts(text) + _idents(text) + _numbers(text)
    out: list[Typed] = []
    for t in found:  # earlier kinds win an overlap
        if not any(t.start < o.end and o.start < t.end for o in out):
            out.append(t)
    out.sort(key=lambda t: t.start)
    rated: list[Typed] = []
    for t in out:  # "$1,850 a month" is one value: the rate's denominator is not a duration of its own
        if rated and _per(text, rated[-1], t):
            rated[-1] = replace(rated[-1], end=t.end)
        else:
            rated.append(t)
    return rated


_PER = re.compile(r"an?\s", re.I)


def _per(text: str, before: Typed, t: Typed) -> bool:
    """Whether `t` is what the value before it is counted per ("$1,850 a month", "5 km a day",
    "3 times a week")."""
    return t.type.startswith("qty:") and not text[before.end:t.start].strip() and bool(_PER.match(text, t.start))


def _attributes(text: str) -> list[Typed]:
    return [Typed(f"attr:{dimension}", value, start, end) for dimension, value, start, end in attributes(text)]


def _money(text: str) -> list[Typed]:
    out = []
    for m in _MONEY.finditer(text):
        amount = number(m.group("n1") or m.group("n2")) or 0.0
        amount *= 1000 if (m.group("k1") or m.group("k2")) else 1
        currency = _CURRENCY[(m.group("c1") or m.group("c2")).lower()]
        out.append(Typed(f"money:{currency}", f"{amount:g}", m.start(), m.end()))
    return out


_FRACTIONS = {"half": 0.5, "quarter": 0.25, "third": 1 / 3}
_FRACTION = re.compile(r"\b(?:a\s+|one\s+)?(half|quarter|third)\s+(?:of\s+)?$", re.I)


def _quantities(text: str) -> list[Typed]:
    out = []
    for m in _QUANTITY.finditer(text):
        raw = m.group("u")
        unit = _BINARY.get(raw) or PHRASES.get(raw.lower()) or raw.lower()
        n = number(m.group("n"))
        if n is None or unit not in UNITS or (unit in ("m", "s", "g", "h") and not m.group("n")[0].isdigit()) or _titled(m):
            continue
        dimension, factor = UNITS[unit]
        part = _FRACTION.search(text, 0, m.start())
        n *= _FRACTIONS[part.group(1).lower()] if part else 1.0  # "a quarter of an hour" is 15 minutes
        out.append(Typed(f"qty:{dimension}", f"{n * factor:g}", part.start() if part else m.start(), m.end()))
    return out


def _titled(m: re.Match[str]) -> bool:
    """ "Gone in Sixty Seconds", "A Thousand Years": a number in words before a capitalised word is a title's."""
    return m.group("n")[0].isalpha() and m.group(m.lastindex or 0)[0].isupper()


def _counts(text: str) -> list[Typed]:
    out = []
    for m in _COUNT.finditer(text):
        n = number(m.group("n"))
        if n is not None and not _titled(m):
            noun = m.group("noun").lower()
            out.append(Typed(f"count:{noun[:-1]}", f"{n:g}", m.start(), m.end()))
    return out


# a day counted from today: "tomorrow", "in two weeks", "three weeks from now", "10 days out"
# ("today" is left out: it says "nowadays" as often as it dates anything)
_OFFSET = re.compile(
    rf"\b(?:(?P<tomorrow>(?:the\s+)?day\s+after\s+tomorrow|tomorrow)\b|"
    rf"in\s+(?P<n1>an?|{SPELLED_NUMBER}|\d+)\s+(?P<u1>days?|weeks?|months?)\b(?!\s+(?:from|of|after|before|later|ago))|"
    rf"(?P<n2>an?|{SPELLED_NUMBER}|\d+)\s+(?P<u2>days?|weeks?|months?)\s+(?:from\s+(?:now|today)|out)\b)", re.I)
_OFFSET_DAYS = {"day": 1, "week": 7, "month": 30}
_TITLE_NEXT = re.compile(r"\s+(?!I\b)[A-Z]")
_TOOK = re.compile(r"(?:\w+ed|done|made|took|\d\s*[a-z]+|\d)\s+$", re.I)
RELATIVE_DATE = "in:"  # how a day counted from the day it was said is written ("in:14": in two weeks)


def _offsets(text: str) -> list[Typed]:
    """A day counted from today, as "in:<days>": comparable with another such day and with a
    weekday ("next Friday" is 1 to 13 days away), not with a calendar date."""
    out = []
    for m in _OFFSET.finditer(text):
        if m.group("tomorrow"):
            if _in_title(text, m):
                continue
            days = 1.0 if m.group("tomorrow").lower() == "tomorrow" else 2.0
        else:
            if m.group("n1") and _TOOK.search(text, 0, m.start()):
                continue  # "climbed in 2 days", "350 miles in six days": how long it took, not when
            n = number(m.group("n1") or m.group("n2"))
            if n is None:
                continue
            days = n * _OFFSET_DAYS[(m.group("u1") or m.group("u2")).lower().rstrip("s")]
        out.append(Typed("date", f"{RELATIVE_DATE}{days:g}", m.start(), m.end()))
    return out


def _in_title(text: str, m: re.Match[str]) -> bool:
    """ "The Day After Tomorrow", "Tomorrow Never Dies": capitalised inside a sentence or before
    another capitalised word, the words are a title's ("Tomorrow I fly" is still a day)."""
    if any(ch.isupper() for ch in m.group(0)[1:]):
        return True
    return text[m.start()].isupper() and bool(m.start() or _TITLE_NEXT.match(text, m.end()))


def _dates(text: str) -> list[Typed]:
    out = []
    for m in _DATE.finditer(text):
        if m.group("m1") and m.group("m1").lower() == "may" and not re.match(r"\s+\d", text[m.end("m1"):]):
            continue
        if re.match(r"['’]s\b", text[m.end():]):
            continue  # "Friday's show" names the show, it does not date it
        if m.group("wd"):
            value = f"wd:{'next' if text[:m.start()].lower().endswith('next ') else 'this'}:{m.group('wd').lower()}"
        elif m.group("y"):
            value = f"m{int(m.group('m4'))}d{int(m.group('d4'))}"
        else:
            month = m.group("m1") or m.group("m2")
            day = int(m.group("d1") or m.group("d2") or m.group("d3"))
            value = f"m{MONTHS[month.lower().rstrip('.')]}d{day}" if month else f"d{day}"
            year = m.group("y1") or m.group("y2")
            value += f"y{year}" if year else ""
        out.append(Typed("date", value, m.start(), m.end()))
    return out


_YEAR = re.compile(r"\b(?:in|since|from|until|till|of|born|during)\s+(?:early\s+|late\s+|mid-?)?(?P<y>(?:19|20)\d\d)\b(?![\d%-]|\s*(?:am|pm)\b)", re.I)


_MONTH_ONLY = re.compile(rf"\b(?:(?:early|mid|late|the\s+end\s+of|end\s+of|the\s+start\s+of|start\s+of)[\s-]+|in\s+)(?P<m>{MONTH})(?![\w-]|\s+\d)", re.I)


def _months(text: str) -> list[Typed]:
    """A month on its own where a date goes ("mid-May", "in June"): comparable with a day of another month."""
    return [Typed("date", f"m{MONTHS[m.group('m').lower().rstrip('.')]}", m.start(), m.end()) for m in _MONTH_ONLY.finditer(text)]


def _years(text: str) -> list[Typed]:
    """A year on its own where a date goes ("born in 1987", "since 2019"): a date, not a count."""
    return [Typed("date", f"y{m.group('y')}", m.start("y"), m.end("y")) for m in _YEAR.finditer(text)]


def _times(text: str) -> list[Typed]:
    out = []
    for m in _TIME.finditer(text):
        if m.group(6):
            minutes = 0 if m.group(6).lower() == "midnight" else 720
        else:
            hour, minute = int(m.group(1) or m.group(4)), int(m.group(2) or m.group(5) or 0)
            if m.group(3):
                hour = hour % 12 + (12 if m.group(3).lower().startswith("p") else 0)
            if hour > 23 or minute > 59:
                continue
            minutes = hour * 60 + minute
        out.append(Typed("time", f"{minutes // 60:02d}:{minutes % 60:02d}", m.start(), m.end()))
    return out


_BARE = re.compile(rf"(?<![\w$€£¥.,-])(?P<n>{_NUM}(?:{_THOUSANDS}|\s+(?:thousand|million|billion)\b)?)(?![\w%-]|[.,]\d)")


_BARE_WORD = re.compile(rf"\b(?P<n>{'|'.join(w for w in sorted(NUMBER_WORDS, key=len, reverse=True) if w != 'one')})\b(?!-)", re.I)


_LABEL = re.compile(r"(?<![\w'’])[A-Z][a-z]+\s+$")  # "Phase 2", "Gate 14": a number after a capitalised word says which one


def _numbers(text: str) -> list[Typed]:
    """Bare numbers, in digits or words ("serves six"); "one" is a pronoun more often than a number."""
    found = list(_BARE.finditer(text)) + list(_BARE_WORD.finditer(text))
    found = [m for m in found if not _LABEL.search(text, 0, m.start())]
    return [Typed("num", f"{number(m.group('n')):g}", m.start(), m.end()) for m in found]


def _idents(text: str) -> list[Typed]:
    return [Typed("id", m.group(0).lower(), m.start(), m.end()) for m in _IDENT.finditer(text)]


POSSESSIVES = r"[Mm]y|[Hh]is|[Hh]er|[Oo]ur|[Tt]heir|[Yy]our"
_APPOSED = re.compile(rf"\b(?:{POSSESSIVES})\s+(?:[a-z][\w-]*\s+){{1,2}}$")  # "my manager Tom"
# what may follow a name that still ends its phrase: "my manager Tom asking for ...", "in Dallas leaving saturday"
_PHRASE_AFTER_NAME = re.compile(r"\s+(?:[a-z]+(?:ing|ed)|said|says|told|wants|thinks|knows|about|tonight|today|tomorrow|asap|first)\b")
_PLACED = re.compile(r"\b(?:in|at|near|outside)\s+$")  # "my parents' place in Dallas"
_DIRECTED = re.compile(r"\b(?:have|let|ask|tell|get|cc|ping|invite|assign(?:ed)?\s+\w+\s+to|by)\s+(?:the\s+|our\s+|my\s+)?$", re.I)


def _names(text: str) -> list[Typed]:
    """Capitalised names that end their noun phrase ("under Hughes", "in Denver", "Python 3.12"); a
    capitalised word that qualifies a noun ("the Paris office") says which thing, not what value,
    unless someone is asked to act through it ("have Marcus handle it"); a name set beside a role
    ("my manager Tom asking ...") is the role's value, and a place after "in" the place ("in Dallas
    leaving saturday"), whatever verb follows."""
    out = []
    first = re.match(r"\W*[\w'’.-]+", text)
    named_first = _NAMED_FIRST.match(text) and first.group(0).strip(" \"'(").lower() not in FUNCTION_WORDS
    start = first.end() if first and not named_first else 0
    for m in _NAME.finditer(text, start):  # every sentence starts with a capital, unless a role follows
        literal = m.group(0).rstrip(".")
        directed = _DIRECTED.search(text[max(0, m.start() - 24):m.start()])
        if directed and not _NAME_STOP.match(text, m.start() + len(literal)):
            literal = literal.split()[0]
        before = (max(0, m.start() - 40), m.start())
        ends = _NAME_STOP.match(text, m.start() + len(literal)) or (
            (_APPOSED.search(text, *before) or _PLACED.search(text, *before)) and _PHRASE_AFTER_NAME.match(text, m.start() + len(literal)))
        if literal.lower() in _NOT_NAMES or not (directed or ends):
            continue
        value = re.sub(r"^(?:dr|mr|ms|mrs)\.\s+", "", literal.lower())
        out.append(Typed("name", value, m.start(), m.start() + len(literal)))
    return out
