"""Typed values in a sentence: money, quantities with units, counts, dates, times, names, identifiers.

Each value comes with a type that says what it can be compared with ("qty:duration" compares
with "qty:duration" whatever the unit) and a canonical form that makes equal values equal
("2 hours" and "120 minutes" are both 7200 s; "$5,000" and "5k dollars" are both 5000 usd).
Nothing here knows a domain: units and number formats are the vocabulary, not sentences.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .attributes import attributes
from .lexicon import MONTH, MONTHS, NUMBER_WORDS, WEEKDAY


@dataclass(frozen=True)
class Typed:
    type: str  # "money:usd", "qty:duration", "count:epoch", "date", "time", "name", "id"
    value: str  # canonical and comparable
    start: int  # span in the sentence text
    end: int


_NUM = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
_WORD_NUM = "|".join(sorted(NUMBER_WORDS, key=len, reverse=True))
_MONEY = re.compile(
    rf"(?P<c1>[$€£¥])\s?(?P<n1>{_NUM})\s?(?P<k1>k\b)?|"
    rf"\b(?P<n2>{_NUM})\s?(?P<k2>k\b)?\s?(?P<c2>dollars?|bucks|euros?|pounds|usd|eur|gbp|quid)\b", re.I)
_CURRENCY = {"$": "usd", "dollar": "usd", "dollars": "usd", "bucks": "usd", "usd": "usd", "€": "eur", "euro": "eur",
             "euros": "eur", "eur": "eur", "£": "gbp", "pounds": "gbp", "gbp": "gbp", "quid": "gbp", "¥": "jpy"}

# unit → (dimension, factor to the base unit)
UNITS: dict[str, tuple[str, float]] = {
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), ("duration", 1.0)),
    **dict.fromkeys(("min", "mins", "minute", "minutes"), ("duration", 60.0)),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), ("duration", 3600.0)),
    **dict.fromkeys(("day", "days"), ("duration", 86400.0)),
    **dict.fromkeys(("week", "weeks"), ("duration", 604800.0)),
    **dict.fromkeys(("month", "months"), ("duration", 2592000.0)),  # 30 days: months compare with months
    **dict.fromkeys(("year", "years", "yr", "yrs"), ("duration", 31536000.0)),
    **dict.fromkeys(("mm", "millimetre", "millimeter", "millimetres", "millimeters"), ("length", 0.001)),
    **dict.fromkeys(("cm", "centimetre", "centimeter", "centimetres", "centimeters"), ("length", 0.01)),
    **dict.fromkeys(("m", "metre", "meter", "metres", "meters"), ("length", 1.0)),
    **dict.fromkeys(("km", "kilometre", "kilometer", "kilometres", "kilometers"), ("length", 1000.0)),
    **dict.fromkeys(("mi", "mile", "miles"), ("length", 1609.344)),
    **dict.fromkeys(("ft", "foot", "feet"), ("length", 0.3048)),
    **dict.fromkeys(("kb", "kilobytes", "kilobyte"), ("data", 1e3)), **dict.fromkeys(("mb", "megabytes", "megabyte"), ("data", 1e6)),
    **dict.fromkeys(("gb", "gigabytes", "gigabyte"), ("data", 1e9)), **dict.fromkeys(("tb", "terabytes", "terabyte"), ("data", 1e12)),
    "ki": ("data", 1024.0), "kib": ("data", 1024.0), "mi": ("data", 1024.0 ** 2), "mib": ("data", 1024.0 ** 2),
    "gi": ("data", 1024.0 ** 3), "gib": ("data", 1024.0 ** 3), "ti": ("data", 1024.0 ** 4), "tib": ("data", 1024.0 ** 4),
    **dict.fromkeys(("g", "gram", "grams"), ("mass", 1.0)), **dict.fromkeys(("kg", "kilo", "kilos", "kilograms"), ("mass", 1000.0)),
    **dict.fromkeys(("lb", "lbs"), ("mass", 453.592)),
    **dict.fromkeys(("%", "percent", "per cent"), ("percent", 1.0)),
    **dict.fromkeys(("px", "pixel", "pixels"), ("pixels", 1.0)),
}
_UNIT = "|".join(sorted((re.escape(u) for u in UNITS), key=len, reverse=True))
_QUANTITY = re.compile(rf"\b(?P<n>{_NUM}|{_WORD_NUM}|an?)(?:\s?-\s?|\s?|\s+(?:full|whole|extra|additional)\s+)(?P<u>{_UNIT})(?![\w])", re.I)
_COUNT = re.compile(rf"\b(?P<n>{_NUM}|{_WORD_NUM})\s+(?P<noun>[a-z][a-z-]{{2,}}s)\b")
_DATE = re.compile(
    rf"\b(?P<m1>{MONTH})\s+(?P<d1>\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s+(?P<y1>\d{{4}})\b)?(?!\s*(?::|am|pm|%|\d))|"
    rf"\b(?:the\s+)?(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<m2>{MONTH})(?![a-z])(?:,?\s+(?P<y2>\d{{4}})\b)?|"
    rf"\bthe\s+(?P<d3>\d{{1,2}})(?:st|nd|rd|th)\b|\b(?P<y>\d{{4}})-(?P<m4>\d{{2}})-(?P<d4>\d{{2}})\b|"
    rf"\b(?P<wd>{WEEKDAY})\b", re.I)
_TIME = re.compile(r"\b(\d{1,2})(?::(\d{2}))?\s*(am|pm|a\.m\.|p\.m\.)|\b(\d{1,2}):(\d{2})\b|\b(noon|midday|midnight)\b", re.I)
_IDENT = re.compile(r"\b(?=[\w.-]*\d)(?=[\w.-]*[a-z])[a-z][\w.-]*[a-z0-9]\b|\b\d+[a-z]\b|\b\d+\.\d+(?:\.\d+)*\b", re.I)
_NAME = re.compile(r"(?<![\w'’.-])(?:Dr\.\s+|Mr\.\s+|Ms\.\s+|Mrs\.\s+)?[A-Z][\w'’.-]*(?:\s+(?:d'|de\s+|van\s+|von\s+)?[A-Z][\w'’-]*)*"
                   r"(?:\s+\d+(?:\.\d+)*)?")
_NOT_NAMES = {"i", "i'm", "i'd", "i'll", "i've", "ok", "okay"} | set(MONTHS) | {
    "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"}
_NAME_STOP = re.compile(r"\s*(?:$|[,.;:!?)]|\b(?:for|in|at|on|to|by|from|with|and|or|but|not|instead|rather|please|as|"
                        r"now|then|too|again|after|before|because|since|so|if|of|is|are|was|will|should)\b)")


def number(raw: str) -> float | None:
    raw = raw.lower().replace(",", "")
    if raw in ("a", "an"):
        return 1.0
    if raw in NUMBER_WORDS:
        return float(NUMBER_WORDS[raw])
    try:
        return float(raw)
    except ValueError:
        return None


def typed_values(text: str) -> list[Typed]:
    """Every typed value in `text`, longest first where two overlap (a date is not also a count)."""
    found = _money(text) + _quantities(text) + _dates(text) + _times(text) + _attributes(text) + _names(text) + _counts(text) + _idents(text) + _numbers(text)
    out: list[Typed] = []
    for t in found:  # earlier kinds win an overlap
        if not any(t.start < o.end and o.start < t.end for o in out):
            out.append(t)
    return sorted(out, key=lambda t: t.start)


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


def _quantities(text: str) -> list[Typed]:
    out = []
    for m in _QUANTITY.finditer(text):
        unit = m.group("u").lower()
        n = number(m.group("n"))
        if n is None or (unit in ("m", "s", "g", "h") and not m.group("n")[0].isdigit()):
            continue
        dimension, factor = UNITS[unit]
        out.append(Typed(f"qty:{dimension}", f"{n * factor:g}", m.start(), m.end()))
    return out


def _counts(text: str) -> list[Typed]:
    out = []
    for m in _COUNT.finditer(text):
        n = number(m.group("n"))
        if n is not None:
            noun = m.group("noun").lower()
            out.append(Typed(f"count:{noun[:-1]}", f"{n:g}", m.start(), m.end()))
    return out


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


_BARE = re.compile(rf"(?<![\w$€£¥.,-])(?P<n>{_NUM})(?![\w%-]|[.,]\d)")


_BARE_WORD = re.compile(rf"\b(?P<n>{'|'.join(w for w in sorted(NUMBER_WORDS, key=len, reverse=True) if w != 'one')})\b(?!-)", re.I)


def _numbers(text: str) -> list[Typed]:
    """Bare numbers, in digits or words ("serves six"); "one" is a pronoun more often than a number."""
    found = list(_BARE.finditer(text)) + list(_BARE_WORD.finditer(text))
    return [Typed("num", f"{number(m.group('n')):g}", m.start(), m.end()) for m in found]


def _idents(text: str) -> list[Typed]:
    return [Typed("id", m.group(0).lower(), m.start(), m.end()) for m in _IDENT.finditer(text)]


_DIRECTED = re.compile(r"\b(?:have|let|ask|tell|get|cc|ping|invite|assign(?:ed)?\s+\w+\s+to|by)\s+(?:the\s+|our\s+|my\s+)?$", re.I)


def _names(text: str) -> list[Typed]:
    """Capitalised names that end their noun phrase ("under Hughes", "in Denver", "Python 3.12"); a
    capitalised word that qualifies a noun ("the Paris office") says which thing, not what value,
    unless someone is asked to act through it ("have Marcus handle it")."""
    out = []
    first = re.match(r"\W*[\w'’.-]+", text)
    for m in _NAME.finditer(text, first.end() if first else 0):  # every sentence starts with a capital
        literal = m.group(0).rstrip(".")
        directed = _DIRECTED.search(text[max(0, m.start() - 24):m.start()])
        if directed and not _NAME_STOP.match(text, m.start() + len(literal)):
            literal = literal.split()[0]
        if literal.lower() in _NOT_NAMES or not (directed or _NAME_STOP.match(text, m.start() + len(literal))):
            continue
        value = re.sub(r"^(?:dr|mr|ms|mrs)\.\s+", "", literal.lower())
        out.append(Typed("name", value, m.start(), m.start() + len(literal)))
    return out
