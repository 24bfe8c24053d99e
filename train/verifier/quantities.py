"""Numbers, units of measure and dates in running text, found and rewritten mechanically.

Two rewrites per slot, both deterministic given a `random.Random`:
- `paraphrase`: the same fact in other words: another unit, rounded, with a hedge that is true
  ("8,849 m" -> "about 8.8 km", "1,642 metres" -> "roughly 1.6 kilometres", "4,529" -> "about 4,500",
  "March 2, 1991" -> "2 March 1991" / "1991-03-02" / "early March 1991", "1991" -> "the early 1990s");
- `falsify`: the same wording with the fact changed: the number scaled by a factor far outside any
  rounding, the value given in the wrong unit ("8,849 m" -> "about 8,800 ft"), another day, month or
  year (in any of the formats above), another decade, another small count.

A rewrite keeps the slot's surroundings; `apply` returns the sentence with the slot replaced.
Nothing here reads the proxy's code: the training data must not depend on the rules it is meant
to replace.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass

MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December"]
MONTH_INDEX = {m.lower(): i + 1 for i, m in enumerate(MONTHS)}
MONTH_INDEX.update({m[:3].lower(): i + 1 for i, m in enumerate(MONTHS)})
MONTH_INDEX["sept"] = 9
DAYS_IN_MONTH = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]

# surface form -> (dimension, factor to the dimension's base unit, canonical key)
UNIT_NAMES: dict[str, tuple[str, float, str]] = {}
# canonical key -> the names it is written with when it is the target of a rewrite
UNIT_OUT: dict[str, list[str]] = {}
for names, out, dim, factor in (
    ("mm millimetre millimetres millimeter millimeters", "mm|millimetres", "length", 1e-3),
    ("cm centimetre centimetres centimeter centimeters", "cm|centimetres|centimeters", "length", 1e-2),
    ("m metre metres meter meters", "m|metres|meters", "length", 1.0),
    ("km kilometre kilometres kilometer kilometers", "km|kilometres|kilometers", "length", 1e3),
    ("ft foot feet", "ft|feet", "length", 0.3048),
    ("mi mile miles", "miles", "length", 1609.344),
    ("inches inch", "inches", "length", 0.0254),
    ("km2 km² sq_km square_kilometres square_kilometers", "km²|square kilometres|square kilometers", "area", 1e6),
    ("sq_mi mi2 mi² square_miles square_mile", "square miles", "area", 2589988.110336),
    ("ha hectare hectares", "hectares", "area", 1e4),
    ("acre acres", "acres", "area", 4046.8564224),
    ("g gram grams", "grams|g", "mass", 1e-3),
    ("kg kilogram kilograms kilos", "kg|kilograms", "mass", 1.0),
    ("lb lbs pound pounds", "pounds|lb", "mass", 0.45359237),
    ("tonne tonnes", "tonnes", "mass", 1e3),
    ("l litre litres liter liters", "litres|liters", "volume", 1.0),
    ("gallon gallons", "US gallons", "volume", 3.785411784),
    ("km/h kph", "km/h", "speed", 1 / 3.6),
    ("mph miles_per_hour", "mph|miles per hour", "speed", 0.44704),
    ("°c celsius", "°C|degrees Celsius", "celsius", 1.0),
    ("°f fahrenheit", "°F|degrees Fahrenheit", "fahrenheit", 1.0),
    ("second seconds", "seconds", "time", 1.0),
    ("minute minutes", "minutes", "time", 60.0),
    ("hour hours", "hours", "time", 3600.0),
):
    key = names.split()[0].replace("_", " ")
    UNIT_OUT[key] = out.split("|")
    for name in names.split():
        UNIT_NAMES[name.replace("_", " ")] = (dim, factor, key)

NUMBER = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
_UNIT_ALT = "|".join(sorted((re.escape(u) for u in UNIT_NAMES), key=len, reverse=True))
QUANTITY_RE = re.compile(rf"(?<![\w.,$£€])({NUMBER})(?:\s*-\s*|\s+|(?=[°%]))({_UNIT_ALT})(?![\w²])(?:\s*\(([^)]{{1,40}})\))?",
                         re.IGNORECASE)
SCALE_WORDS = {"thousand": 1e3, "million": 1e6, "billion": 1e9}
COUNT_RE = re.compile(rf"(?<![\w.,$£€#/–-])({NUMBER})(?:\s+(thousand|million|billion))?(?![\w.,%°/–-]|\.\d|\s*%)")
_MONTH_ALT = "|".join(sorted(MONTH_INDEX, key=len, reverse=True))
DATE_MDY = re.compile(rf"\b({_MONTH_ALT})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", re.IGNORECASE)
DATE_DMY = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH_ALT})\.?,?\s+(\d{{4}})\b", re.IGNORECASE)
DATE_MY = re.compile(rf"\b({_MONTH_ALT})\.?,?\s+(?:of\s+)?(\d{{4}})\b", re.IGNORECASE)
YEAR_RE = re.compile(r"(?<![\w,.$£€#/–-])(1[0-9]{3}|20[0-9]{2})(?![\w%°/–-]|[.,]\d|\s*(?:km|m|ft|mi|kg|people|residents|inhabitants)\b)")
SPELLED = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
           "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty"]
SPELLED_RE = re.compile(r"\b(" + "|".join(SPELLED[2:]) + r")\s+(?=[a-z])", re.IGNORECASE)
DIGIT_COUNT_RE = re.compile(r"(?<![\w.,$£€#/-])([2-9]|1[0-9]|20)\s+(?=[a-z]{3,})")

HEDGES_NEAR = ["about", "roughly", "around", "approximately", "some"]
HEDGES_BELOW = ["just under", "nearly", "almost"]  # the rounded value is above the true one
HEDGES_ABOVE = ["just over", "a little more than", "slightly above"]  # the rounded value is below it


@dataclass(frozen=True)
class Slot:
    """A fact-bearing span of a sentence: `kind` is quantity, count, date, month, year or small."""

    start: int
    end: int
    kind: str
    text: str
    value: float = 0.0
    unit: str = ""  # canonical unit key (quantity)
    day: int = 0
    month: int = 0
    year: int = 0


def parse_number(text: str) -> float:
    return float(text.replace(",", ""))


def fmt(value: float, decimals: int) -> str:
    """1234.5 -> "1,234.5"; integers with thousands separators."""
    if decimals <= 0:
        return f"{int(round(value)):,}"
    return f"{value:,.{decimals}f}"


def rounded(value: float) -> tuple[float, str]:
    """A human rounding: two significant digits from 100 up, one decimal from 1, two below."""
    if value >= 100:
        digits = int(math.floor(math.log10(value))) - 1
        r = round(value / 10 ** digits) * 10 ** digits
        return r, fmt(r, 0)
    if value >= 10:
        r = round(value)
        return r, fmt(r, 0)
    if value >= 1:
        r = round(value, 1)
        return r, (fmt(r, 0) if r == int(r) else fmt(r, 1))
    r = round(value, 2)
    return r, fmt(r, 2)


def hedge_for(true: float, shown: float, rng: random.Random) -> str:
    if shown == true:
        return rng.choice(HEDGES_NEAR + [""])
    if shown > true:
        return rng.choice(HEDGES_NEAR + HEDGES_BELOW)
    return rng.choice(HEDGES_NEAR + HEDGES_ABOVE)


def ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _overlaps(span: tuple[int, int], taken: list[tuple[int, int]]) -> bool:
    return any(span[0] < e and s < span[1] for s, e in taken)


def find_slots(text: str) -> list[Slot]:
    """Every quantity with a unit, full date, month-and-year, year and count of `text`, left to right,
    never two over one span (dates first, then quantities, years, counts)."""
    slots: list[Slot] = []
    taken: list[tuple[int, int]] = []

    def add(slot: Slot) -> None:
        if not _overlaps((slot.start, slot.end), taken):
            slots.append(slot)
            taken.append((slot.start, slot.end))

    for m in DATE_MDY.finditer(text):
        month, day, year = MONTH_INDEX[m.group(1).lower()], int(m.group(2)), int(m.group(3))
        if 1 <= day <= DAYS_IN_MONTH[month - 1]:
            add(Slot(m.start(), m.end(), "date", m.group(0), day=day, month=month, year=year))
    for m in DATE_DMY.finditer(text):
        day, month, year = int(m.group(1)), MONTH_INDEX[m.group(2).lower()], int(m.group(3))
        if 1 <= day <= DAYS_IN_MONTH[month - 1]:
            add(Slot(m.start(), m.end(), "date", m.group(0), day=day, month=month, year=year))
    for m in DATE_MY.finditer(text):
        if m.group(1).lower() == "may" and m.group(0)[0] == "m":  # "may" the verb
            continue
        add(Slot(m.start(), m.end(), "month", m.group(0), month=MONTH_INDEX[m.group(1).lower()], year=int(m.group(2))))
    for m in QUANTITY_RE.finditer(text):
        unit = UNIT_NAMES.get(m.group(2).lower())
        if unit is None or (m.group(2) == "m" and re.match(r"\s*[A-Z]", text[m.end():])):
            continue
        value = parse_number(m.group(1))
        if value <= 0:
            continue
        end = m.end() if m.group(3) and re.search(r"\d", m.group(3) or "") else m.end(2)
        add(Slot(m.start(), end, "quantity", text[m.start():end], value=value, unit=unit[2]))
    for m in YEAR_RE.finditer(text):
        before = text[max(0, m.start() - 12):m.start()]
        if re.search(r"[A-Z][\w.]*\s$", before) and not re.search(r"\b(?:In|By|Since|From|Until|Circa|c\.)\s$", before):
            continue  # "Route 1944", "Windows 2000": a name, not a year
        add(Slot(m.start(), m.end(), "year", m.group(0), year=int(m.group(1))))
    for m in COUNT_RE.finditer(text):
        value = parse_number(m.group(1)) * SCALE_WORDS.get((m.group(2) or "").lower(), 1.0)
        before = text[max(0, m.start() - 12):m.start()]
        if value < 20 or re.search(r"[A-Z][\w.]*\s$|No\.\s$|#\s*$", before):
            continue
        if re.fullmatch(r"1[0-9]{3}|20[0-9]{2}", m.group(1)):
            continue  # a year the year pattern declined
        add(Slot(m.start(), m.end(), "count", m.group(0), value=value))
    for m in SPELLED_RE.finditer(text):
        add(Slot(m.start(1), m.end(1), "small", m.group(1), value=float(SPELLED.index(m.group(1).lower()))))
    for m in DIGIT_COUNT_RE.finditer(text):
        add(Slot(m.start(1), m.end(1), "small", m.group(1), value=float(m.group(1))))
    return sorted(slots, key=lambda s: s.start)


def apply(text: str, slot: Slot, replacement: str) -> str:
    return text[:slot.start] + replacement + text[slot.end:]


# ---- quantities --------------------------------------------------------------------------------


def _to_base(value: float, unit: str) -> tuple[str, float]:
    dim, factor, _ = UNIT_NAMES[unit]
    return dim, value * factor


def _convert(value: float, unit: str, target: str) -> float:
    dim, base = _to_base(value, unit)
    if dim == "celsius" or dim == "fahrenheit":
        raise ValueError("temperatures are affine")
    return base / UNIT_NAMES[target][1]


def _temperature(value: float, unit: str) -> tuple[str, float]:
    if unit == "°c":
        return "°f", value * 9 / 5 + 32
    return "°c", (value - 32) * 5 / 9


# the units a quantity is re-expressed in (what a person would write instead)
TARGETS = {"mm": ["inches", "cm"], "cm": ["inches", "mm"], "m": ["km", "ft"], "km": ["mi", "m"],
           "ft": ["m"], "mi": ["km"], "inches": ["cm"], "km2": ["sq mi", "ha"], "sq mi": ["km2"],
           "ha": ["acre", "km2"], "acre": ["ha"], "g": ["kg"], "kg": ["lb", "g"], "lb": ["kg"],
           "tonne": ["kg"], "l": ["gallon"], "gallon": ["l"], "km/h": ["mph"], "mph": ["km/h"],
           "second": ["minute"], "minute": ["hour", "second"], "hour": ["minute"]}


def _targets(unit: str) -> list[str]:
    return TARGETS.get(unit, [])


def unit_name(unit: str, shown: float, rng: random.Random) -> str:
    """A name of `unit` (singular for exactly one), with the space it takes after a number."""
    name = rng.choice(UNIT_OUT[unit])
    if shown == 1 and name not in ("ft", "km", "m", "mm", "cm", "kg", "lb", "g", "mph", "km/h", "km²"):
        name = {"feet": "foot", "inches": "inch"}.get(name, name[:-1] if name.endswith("s") else name)
    return name if name in ("°C", "°F") else f" {name}"


def _quantity_phrase(value: float, unit: str, rng: random.Random, true_value: float | None = None) -> str:
    shown, text = rounded(value)
    hedge = hedge_for(value if true_value is None else true_value, shown, rng) if true_value is None else rng.choice(HEDGES_NEAR)
    return f"{hedge} {text}{unit_name(unit, shown, rng)}".strip()


def paraphrase_quantity(slot: Slot, rng: random.Random) -> str | None:
    """The same quantity in another unit of its dimension, rounded, with a true hedge."""
    if slot.unit in ("°c", "°f"):
        target, value = _temperature(slot.value, slot.unit)
        if target == "°c" and slot.value < 40:
            return None  # a rounding of a few degrees is a real change at room temperature
        shown, text = rounded(abs(value)) if abs(value) >= 10 else (round(value), str(round(value)))
        return f"{hedge_for(value, shown, rng)} {'-' if value < 0 else ''}{text}{unit_name(target, shown, rng)}".strip()
    options = []
    for target in _targets(slot.unit):
        value = _convert(slot.value, slot.unit, target)
        if 0.5 <= value < 100000 and abs(rounded(value)[0] - value) / value <= 0.06:
            options.append((target, value))
    if not options:
        return None
    target, value = rng.choice(options)
    shown, text = rounded(value)
    return f"{hedge_for(value, shown, rng)} {text}{unit_name(target, shown, rng)}".strip()


def falsify_quantity(slot: Slot, rng: random.Random) -> tuple[str, str] | None:
    """The quantity made false: scaled (in its own or another unit) or given in the wrong unit."""
    factor = rng.choice([0.4, 0.5, 0.6, 0.7, 1.5, 1.7, 2.0, 2.5, 3.0])
    if slot.unit in ("°c", "°f"):
        target, value = _temperature(slot.value, slot.unit)
        wrong = slot.value + rng.choice([-1, 1]) * max(8.0, abs(slot.value) * 0.4)
        if rng.random() < 0.5:  # the number kept, the scale wrong: 180 °C -> "around 180 °F"
            return f"{rng.choice(HEDGES_NEAR)} {fmt(slot.value, 0)}{unit_name(target, slot.value, rng)}", "unit_confusion"
        return f"{fmt(round(wrong), 0)}{unit_name(slot.unit, wrong, rng)}", "number"
    mode = rng.random()
    targets = [t for t in _targets(slot.unit) if 0.5 <= _convert(slot.value, slot.unit, t) < 100000]
    if mode < 0.35 or not targets:  # own unit, number scaled, exact-looking
        value = slot.value * factor
        decimals = 0 if slot.value == int(slot.value) and value >= 10 else 1
        return f"{fmt(value, decimals)}{unit_name(slot.unit, value, rng)}", "number"
    target = rng.choice(targets)
    dim_factor = UNIT_NAMES[target][1] / UNIT_NAMES[slot.unit][1]
    if mode < 0.65 and not 0.75 <= dim_factor <= 1.33:  # the number kept, the unit swapped: 8,849 m -> "about 8,800 ft"
        shown, text = rounded(slot.value)
        return f"{rng.choice(HEDGES_NEAR)} {text}{unit_name(target, shown, rng)}", "unit_confusion"
    value = _convert(slot.value, slot.unit, target) * factor  # converted, then wrong: 8,849 m -> "about 5.3 km"
    return _quantity_phrase(value, target, rng, true_value=value), "converted_number"


# ---- counts ------------------------------------------------------------------------------------


def _count_words(value: float, rng: random.Random) -> str:
    shown, text = rounded(value)
    if shown >= 1e6 and rng.random() < 0.7:
        scale, word = (1e9, "billion") if shown >= 1e9 else (1e6, "million")
        text = f"{shown / scale:.1f}".rstrip("0").rstrip(".") + f" {word}"
    elif shown >= 1e3 and rng.random() < 0.3:
        text = f"{shown / 1e3:.1f}".rstrip("0").rstrip(".") + " thousand"
    return text


def paraphrase_count(slot: Slot, rng: random.Random) -> str | None:
    if slot.value < 100:
        return None
    shown = rounded(slot.value)[0]
    if shown == slot.value:  # already round: only another way of writing it is a paraphrase
        if shown >= 1e6 and "million" not in slot.text and "billion" not in slot.text:
            scale, word = (1e9, "billion") if shown >= 1e9 else (1e6, "million")
            return f"{shown / scale:.2f}".rstrip("0").rstrip(".") + f" {word}"
        if re.search(r"million|billion|thousand", slot.text):
            return fmt(shown, 0)
        return None
    return f"{hedge_for(slot.value, shown, rng)} {_count_words(slot.value, rng)}".strip()


def falsify_count(slot: Slot, rng: random.Random) -> tuple[str, str] | None:
    value = slot.value * rng.choice([0.4, 0.5, 0.6, 0.7, 1.5, 1.8, 2.0, 3.0])
    if rng.random() < 0.5:
        return f"{rng.choice(HEDGES_NEAR)} {_count_words(value, rng)}", "number"
    return fmt(value, 0), "number"


def paraphrase_small(slot: Slot, rng: random.Random) -> str | None:
    n = int(slot.value)
    return str(n) if slot.text.isalpha() else SPELLED[n]


def falsify_small(slot: Slot, rng: random.Random) -> tuple[str, str] | None:
    n = int(slot.value)
    other = rng.choice([k for k in range(2, 13) if k != n])
    spelled = slot.text.isalpha() if rng.random() < 0.7 else not slot.text.isalpha()
    text = SPELLED[other] if spelled else str(other)
    return (text.capitalize() if slot.text[:1].isupper() else text), "number"


# ---- dates -------------------------------------------------------------------------------------


def date_text(day: int, month: int, year: int, style: str) -> str:
    name = MONTHS[month - 1]
    return {
        "dmy": f"{day} {name} {year}",
        "mdy": f"{name} {day}, {year}",
        "iso": f"{year:04d}-{month:02d}-{day:02d}",
        "ord": f"the {ordinal(day)} of {name} {year}",
        "mdy_ord": f"{name} {ordinal(day)}, {year}",
        "abbr": f"{name[:3]}. {day}, {year}" if len(name) > 4 else f"{name} {day}, {year}",
    }[style]


def _part_of_month(day: int) -> str:
    return "early" if day <= 10 else "mid-" if day <= 20 else "late"


def _decade(year: int) -> str:
    d = year % 10
    part = "early" if d <= 3 else "mid-" if d <= 6 else "late"
    return f"the {part}{'' if part.endswith('-') else ' '}{year - d}s"


def _century(year: int) -> str:
    return f"the {ordinal((year - 1) // 100 + 1)} century"


def _style_of(text: str) -> str:
    if re.match(r"\d", text):
        return "dmy"
    return "mdy"


def paraphrase_date(slot: Slot, rng: random.Random) -> str | None:
    if slot.kind == "date":
        own = _style_of(slot.text)
        styles = [s for s in ("dmy", "mdy", "iso", "ord", "mdy_ord", "abbr") if s != own]
        choice = rng.random()
        if choice < 0.7:
            return date_text(slot.day, slot.month, slot.year, rng.choice(styles))
        if choice < 0.85:
            part = _part_of_month(slot.day)
            return f"{part}{'' if part.endswith('-') else ' '}{MONTHS[slot.month - 1]} {slot.year}"
        return f"{MONTHS[slot.month - 1]} of {slot.year}"
    if slot.kind == "month":
        return rng.choice([f"{MONTHS[slot.month - 1]} of {slot.year}", f"{slot.month:02d}/{slot.year}"]) \
            if not slot.text.lower().startswith(MONTHS[slot.month - 1].lower() + " of") else f"{MONTHS[slot.month - 1]} {slot.year}"
    if slot.kind == "year":
        if slot.year % 100 == 0:
            return None
        return _decade(slot.year) if rng.random() < 0.75 else _century(slot.year)
    return None


def _wrong_decade(year: int, rng: random.Random) -> str:
    wrong = year + rng.choice([-30, -20, -10, 10, 20, 30])
    if wrong % 100 == 0:
        wrong += 3
    return _decade(wrong)


def _wrong_century(year: int, rng: random.Random) -> str:
    return _century(year + rng.choice([-200, -100, 100]) if year < 1950 else year - rng.choice([100, 200]))


def falsify_date(slot: Slot, rng: random.Random, reworded: bool = False) -> tuple[str, str] | None:
    """The date made wrong; `reworded`: in the vaguer words a paraphrase uses (a part of a month,
    a decade, a century) about as often as the paraphrases use them."""
    if slot.kind == "date" and reworded and rng.random() < 0.4:
        parts = ["early", "mid-", "late"]
        if rng.random() < 0.5:  # the right month, the wrong part of it
            part = rng.choice([p for p in parts if p != _part_of_month(slot.day)])
            month, year = slot.month, slot.year
        else:
            part = rng.choice(parts)
            month, year = rng.choice([m for m in range(1, 13) if m != slot.month]), slot.year
        return f"{part}{'' if part.endswith('-') else ' '}{MONTHS[month - 1]} {year}", "date"
    if slot.kind == "year" and (reworded or rng.random() < 0.3):
        return (_wrong_decade(slot.year, rng) if rng.random() < 0.75 else _wrong_century(slot.year, rng)), "date"
    if slot.kind == "date":
        day, month, year = slot.day, slot.month, slot.year
        what = rng.random()
        if what < 0.35:
            day = rng.choice([d for d in range(1, 29) if abs(d - day) >= 2])
        elif what < 0.7:
            month = rng.choice([m for m in range(1, 13) if m != month])
            day = min(day, 28)
        else:
            year = year + rng.choice([-12, -7, -5, -3, -2, -1, 1, 2, 3, 5, 8])
        style = _style_of(slot.text) if rng.random() < 0.5 else rng.choice(["dmy", "mdy", "iso", "ord", "mdy_ord"])
        return date_text(day, month, year, style), "date"
    if slot.kind == "month":
        if rng.random() < 0.5:
            month = rng.choice([m for m in range(1, 13) if m != slot.month])
            return f"{MONTHS[month - 1]} {slot.year}", "date"
        return f"{MONTHS[slot.month - 1]} {slot.year + rng.choice([-4, -2, -1, 1, 2, 3])}", "date"
    if slot.kind == "year":
        return str(slot.year + rng.choice([-15, -9, -6, -4, -3, -2, -1, 1, 2, 3, 4, 7, 11])), "date"
    return None


# ---- one entry point ---------------------------------------------------------------------------


def paraphrase(slot: Slot, rng: random.Random, before: str = "") -> str | None:
    """The slot's fact in other words (None when no faithful rewrite is known). `before`: the text
    before the slot ("the 2008 film" takes no decade: "the the late 2000s film")."""
    if slot.kind == "year" and re.search(r"(?:\bthe|'s|\ba|\ban)\s+$", before, re.I):
        return None
    if slot.kind == "quantity":
        return paraphrase_quantity(slot, rng)
    if slot.kind == "count":
        return paraphrase_count(slot, rng)
    if slot.kind == "small":
        return paraphrase_small(slot, rng)
    return paraphrase_date(slot, rng)


def falsify(slot: Slot, rng: random.Random, reworded: bool = False, before: str = "") -> tuple[str, str] | None:
    """The slot's fact changed, and what changed ("number", "unit_confusion", "converted_number",
    "date"). `reworded`: when the true claim is a paraphrase, the false one is written like one.
    `before`: the text before the slot (a year after "a"/"the" stays a year: "a 1984 film")."""
    if slot.kind == "year" and re.search(r"(?:\bthe|'s|\ba|\ban)\s+$", before, re.I):
        return str(slot.year + rng.choice([-15, -9, -6, -4, -3, -2, -1, 1, 2, 3, 4, 7, 11])), "date"
    if slot.kind == "quantity":
        return falsify_quantity(slot, rng)
    if slot.kind == "count":
        return falsify_count(slot, rng)
    if slot.kind == "small":
        return falsify_small(slot, rng)
    return falsify_date(slot, rng, reworded)
