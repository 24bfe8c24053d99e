"""Comparing two typed statements: whether they are about the same thing, whether one contradicts
the other, whether they repeat each other. Slot by slot, offline and deterministic; shared by the
clash policy (conversation-level clashes) and the memory policy (a new memory against earlier ones).
"""

from __future__ import annotations

import re

from .bounds import limited, limits_compatible, same_direction, times_compatible
from .lexicon import places_compatible
from .match import Matcher, two_of_a_series
from .model import Statement
from .subject import words
from .typed import RELATIVE_DATE
from .values import count_noun

_COMPATIBLE_DIETS = {frozenset({"vegan", "vegetarian"})}


def _date_parts(value: str) -> tuple[str, int | None, int | None, str]:
    if value.startswith("wd:"):
        return ("weekday", None, None, value)
    if value.startswith(RELATIVE_DATE):
        return ("offset", None, None, value)
    month = re.fullmatch(r"m(\d+)", value)
    if month:
        return ("month", int(month.group(1)), None, value)
    m = re.fullmatch(r"(?:m(\d+))?d(\d+)(?:y\d+)?", value)
    if not m:
        return ("other", None, None, value)
    return ("day", int(m.group(1)) if m.group(1) else None, int(m.group(2)), value)


def _year(value: str) -> str | None:
    m = re.search(r"y(\d+)$", value)
    return m.group(1) if m else None


def _dates_compatible(a: str, b: str) -> bool:
    ka, ma, da, ra = _date_parts(a)
    kb, mb, db, rb = _date_parts(b)
    if _year(a) and _year(b) and _year(a) != _year(b):
        return False  # 12 April 1988 / 12 April 1989
    if {ka, kb} == {"month", "day"} or ka == kb == "month":
        return ma is None or mb is None or ma == mb  # "mid-May" is no day of April
    if "offset" in (ka, kb) and {ka, kb} <= {"offset", "weekday"}:
        return _offsets_compatible(ra, rb)
    if ka != kb:
        return True  # "Friday" and "March 3" cannot be compared without a calendar
    if ka == "weekday":
        qa, qb = ra.split(":")[1], rb.split(":")[1]
        return qa != qb or ra == rb  # "next Friday" vs "Friday": not comparable
    if ma is not None and mb is not None:
        return (ma, da) == (mb, db)
    return da == db


# how many days from today a weekday can be: "this Friday" within the week, "next Friday" up to two weeks on
_WEEKDAY_DAYS = {"this": (0.0, 6.0), "next": (1.0, 13.0)}


def _offsets_compatible(a: str, b: str) -> bool:
    """Two days counted from today ("in:21"), or one and a weekday: whether they can be one day.
    A month is counted as 30 days, so "in a month" and "in four weeks" stay one day."""
    spans = []
    for value in (a, b):
        if value.startswith(RELATIVE_DATE):
            days = float(value[len(RELATIVE_DATE):])
            slack = 3.0 if days >= 28 else 0.0
            spans.append((days - slack, days + slack))
        else:
            spans.append(_WEEKDAY_DAYS[value.split(":")[1]])
    (lo_a, hi_a), (lo_b, hi_b) = spans
    return lo_a <= hi_b and lo_b <= hi_a


_VERSIONED = re.compile(r".*\s\d+(?:\.\d+)*")


def _names_compatible(a: str, b: str) -> bool:
    if bool(_VERSIONED.fullmatch(a)) != bool(_VERSIONED.fullmatch(b)):
        return True  # "Node 20" and "CI": a product at a version is no alternative to a plain name
    wa, wb = a.split(), b.split()
    shorter, longer = (wa, wb) if len(wa) <= len(wb) else (wb, wa)
    return longer[: len(shorter)] == shorter


def _typed_compatible(slot: str, a: str, b: str) -> bool:
    kind = slot[2:].split(":", 1)[0]
    if kind == "date":
        return _dates_compatible(a, b)
    if kind == "time":
        return times_compatible(a, b)
    if kind in ("money", "qty", "count"):
        return _numbers_compatible(a, b, 0.02)  # "6.2 miles" is 10 km
    return False


def _numbers_compatible(a: str, b: str, tolerance: float) -> bool:
    """Two amounts, each a point or a limit ("<1000": at most 1,000), equal within `tolerance`."""
    def same(x: str, y: str) -> bool:
        return abs(float(x) - float(y)) <= tolerance * max(abs(float(x)), abs(float(y)), 1e-9)
    try:
        return limits_compatible(a, b, float, same)
    except ValueError:
        return False


def compatible(slot: str, a: str, b: str) -> bool:
    """Whether two positive values of one slot can both hold."""
    if a == b:
        return True
    family = slot.split(".", 1)[0]
    if family == "location":
        return places_compatible(a, b)
    if family == "diet":
        return frozenset({a, b}) in _COMPATIBLE_DIETS
    if family == "date":
        return _dates_compatible(a, b)
    if family == "amount":
        return _numbers_compatible(a, b, 1e-6)
    if slot in ("user.name", "booking.name", "v.name"):
        return _names_compatible(a, b)
    if family == "v":
        return _typed_compatible(slot, a, b)
    return False


def family(slot: str) -> str:
    """Slots whose values compare: a date the rules tied to an event ("date.departure") and a date
    read on its own ("v.date") are compared through their subjects."""
    head = slot.split(".", 1)[0]
    return f"v.{head}" if head in ("date", "time") else slot


_CATEGORICAL = {"answer.language": "v.attr:language", "answer.tone": "v.attr:tone", "answer.length": "v.attr:length"}


def value_type(slot: str) -> str:
    """What kind of value a slot holds, whichever rule read it: a budget ("amount.budget.total.max.gbp")
    and an amount read on its own ("v.money:gbp") are both money in pounds; a count of guests and a
    bare number ("went up to 55") are both numbers; a reply language and a language named on its own
    ("back to English") are both languages."""
    if slot in _CATEGORICAL:
        return _CATEGORICAL[slot]
    head = slot.split(".", 1)[0]
    if head == "amount":
        return "v.money:" + slot.split("@", 1)[0].rsplit(".", 1)[-1]
    if head == "count" or slot.startswith("v.count:") or slot == "v.num":
        return "v.number"
    return family(slot)


def _noun(slot: str) -> str | None:
    """What a count counts, in one vocabulary for both readings ("count.people", "v.count:guest")."""
    if slot.startswith("count."):
        return slot[6:].split("@", 1)[0].split(">", 1)[0]
    if slot.startswith("v.count:"):
        noun = slot[8:]
        return count_noun(noun + "s") or count_noun(noun) or noun
    return None


def same_kind(a: str, b: str) -> bool:
    """Whether values of slots `a` and `b` are of one kind and can be compared."""
    if a == b:
        return True
    if family(a) != family(b) and value_type(a) != value_type(b):
        return False
    na, nb = _noun(a), _noun(b)
    return na is None or nb is None or na == nb  # "2 adults" and "1 child" count two things


def about_the_same(a: Statement, b: Statement, matcher: Matcher) -> bool:
    """One slot, one subject, one scope; a value typed on its own ("v.date") needs a matching subject,
    and compares with any slot that holds its kind of value (value_type)."""
    if bare_number_of(a, b):
        return matcher.same_scope(a, b)  # "my grocery budget is $400" … "groceries should be 650 a month"
    if a.slot != b.slot and not (a.slot.startswith("v.") or b.slot.startswith("v.")) or not same_kind(a.slot, b.slot):
        return False
    if a.slot == b.slot and a.slot in _CATEGORICAL and _styles_of_two_things(a, b):
        return False
    if two_of_a_series(a, b):
        return False
    if (a.slot.startswith("v.") or b.slot.startswith("v.")) and not matcher.same_subject(a, b):
        return False
    return matcher.same_scope(a, b)


# the words a reply-style rule reads around its value: what is left names the thing styled
_STYLE_WORDS = frozenset("tone style register language sound more answer response reply explanation prefer keep use".split())


def _styles_of_two_things(a: Statement, b: Statement) -> bool:
    """A reply style said for one thing each ("write the cover letter in a formal tone" / "write
    the tweet in a casual tone"): two things with a style each, not one style changed."""
    ta, tb = set(words(a.subject)) - _STYLE_WORDS, set(words(b.subject)) - _STYLE_WORDS
    return bool(ta and tb and not ta & tb)


def takes_bare_numbers(value_type_: str) -> bool:
    """Value types a number said on its own may be: an amount with its currency left out ("… should
    be 650"), a reference number with its kind said shorter ("my zip code is 94110" … "zip is 94117")."""
    return value_type_.startswith(("v.money:", "ref."))


def bare_number_of(a: Statement, b: Statement) -> bool:
    """A bare number said of what an amount of money or a reference number was said of, in the same
    words: the number is that value with its currency or kind left out. Only on shared words: a
    number's subject is too thin for meaning alone to tie it to the other."""
    if "v.num" not in (a.slot, b.slot) or a.slot == b.slot:
        return False
    other = b if a.slot == "v.num" else a
    return takes_bare_numbers(value_type(other.slot)) and bool(words(a.subject) & words(b.subject))


def conflicts(a: Statement, b: Statement, matcher: Matcher = Matcher()) -> bool:
    """Whether `b` (said after `a`) contradicts it. A new run of a step with other arguments
    ("retry with 150 euros") does not: a parameter that changes from step to step is no clash."""
    if b.step or (a.negated and b.negated):
        return False
    if b.correction and b.negated and not a.negated and a.value == b.value and value_type(a.slot) == value_type(b.slot):
        return True  # "sorry, I meant 2 lbs, not 2 kg": the correction names the value it takes back
    if not about_the_same(a, b, matcher):
        return False
    if a.slot.startswith("v.") and a.request and b.request and not (b.changes or b.correction or b.replaces) \
            and same_direction(a, b):
        return False  # "show me page 1" … "show me page 2": successive steps; a limit ("under 2 stops") holds across them
    if a.window and b.window and not (b.changes or b.correction):
        return False  # "pull the last 100 lines" … "grab the last 500": how much of a listing, for each run
    if b.adds and b.slot.startswith("v.") and not (b.changes or b.correction) and a.negated == b.negated:
        return False  # "I also want to visit Florence": one more value of a many-valued slot, not another one
    if a.slot == "v.act":  # one action, said to be done and not done
        refusal, other = (a, b) if a.negated else (b, a)
        return a.negated != b.negated and _overlap(a.value, b.value) >= 0.5 and not for_another(refusal, other)
    if a.negated != b.negated:
        return a.value == b.value  # "I don't want a luxury hotel" / "I want a luxury hotel"
    return not compatible(family(a.slot), limited(a), limited(b))  # "under $1,000" … "the $800 one" both hold


def for_another(refusal: Statement, other: Statement) -> bool:
    """Whether a refusal says what its thing is for and `other` is about something else: "no tip
    for the taxi" … "add a tip for the driver" is another tip."""
    return bool(refusal.refused_for) and not set(refusal.refused_for) & (words(other.subject) | set(other.value.split()))


def _overlap(a: str, b: str) -> float:
    wa, wb = set(a.split()), set(b.split())
    return len(wa & wb) / len(wa | wb) if wa | wb else 0.0


def duplicates(a: Statement, b: Statement, matcher: Matcher = Matcher()) -> bool:
    if a.slot == "v.act":
        return False  # a clause said twice is not a fact to count
    # a limit and a point within it are not one value said twice
    return a.negated == b.negated and same_direction(a, b) and compatible(family(a.slot), a.value, b.value) \
        and about_the_same(a, b, matcher)
