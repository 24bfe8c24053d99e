"""Clash detection: which statements in a conversation contradict each other.

The local detector compares statements slot by slot (text/statements extracts them):
two statements clash when they give one slot incompatible values; they are duplicates when they
give it the same value in different messages. It is offline, deterministic and takes well under
a millisecond once statements are extracted. The LLM judge (judge.py) produces
the same `Clash` records, so resolution does not care which detector found a clash.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Iterable

from ..cache import stable_hash
from ..text.statements.lexicon import places_compatible
from ..text.statements.model import Statement
from .match import Matcher
from .relate import diet_excludes, polarity_flip, replaced

CONTRADICTORY_PREFERENCES = "CONTRADICTORY_PREFERENCES"
CONFLICTING_FACTS = "CONFLICTING_FACTS"
OUTDATED_INFORMATION = "OUTDATED_INFORMATION"
DUPLICATE_FACTS = "DUPLICATE_FACTS"
CLASH_TYPES = (CONTRADICTORY_PREFERENCES, CONFLICTING_FACTS, OUTDATED_INFORMATION, DUPLICATE_FACTS)


def text_keys(texts: dict[tuple[int, int], str]) -> dict[tuple[int, int], str]:
    """A key per user text: its hash, and which occurrence of that exact text it is. Stable as the
    conversation grows, and distinct when the user repeats a message word for word."""
    seen: dict[str, int] = {}
    keys: dict[tuple[int, int], str] = {}
    for where, text in sorted(texts.items()):
        h = stable_hash(text)
        keys[where] = f"{h}#{seen.get(h, 0)}"
        seen[h] = seen.get(h, 0) + 1
    return keys


@dataclass(frozen=True)
class Located:
    """A statement and where it is: message index, text part (-1: string content), text key."""

    message: int
    part: int
    text_hash: str
    st: Statement

    @property
    def key(self) -> str:
        """Stable across turns and re-sends: built from the text, not from the message's index."""
        return stable_hash([self.text_hash, self.st.start, self.st.vstart, self.st.value, self.st.negated])

    @property
    def order(self) -> tuple[int, int, int, int]:
        return (self.message, self.part, self.st.start, self.st.vstart)


@dataclass(frozen=True)
class Clash:
    type: str
    older: Located
    newer: Located
    simultaneous: bool  # both in one message with nothing saying which came last
    detector: str = "local"

    @property
    def key(self) -> str:
        return stable_hash([self.older.key, self.newer.key])

    @property
    def slot(self) -> str:
        return self.newer.st.slot

    @property
    def label(self) -> str:
        return self.newer.st.label

    @property
    def correction(self) -> bool:
        return getattr(self.newer.st, "correction", False)

    @property
    def duplicate(self) -> bool:
        return self.type == DUPLICATE_FACTS


# ----------------------------------------------------------------------------- value logic

_COMPATIBLE_DIETS = {frozenset({"vegan", "vegetarian"})}


def _date_parts(value: str) -> tuple[str, int | None, int | None, str]:
    if value.startswith("wd:"):
        return ("weekday", None, None, value)
    m = re.fullmatch(r"(?:m(\d+))?d(\d+)", value)
    if not m:
        return ("other", None, None, value)
    return ("day", int(m.group(1)) if m.group(1) else None, int(m.group(2)), value)


def _dates_compatible(a: str, b: str) -> bool:
    ka, ma, da, ra = _date_parts(a)
    kb, mb, db, rb = _date_parts(b)
    if ka != kb:
        return True  # "Friday" and "March 3" cannot be compared without a calendar
    if ka == "weekday":
        qa, qb = ra.split(":")[1], rb.split(":")[1]
        return qa != qb or ra == rb  # "next Friday" vs "Friday": not comparable
    if ma is not None and mb is not None:
        return (ma, da) == (mb, db)
    return da == db


def _names_compatible(a: str, b: str) -> bool:
    wa, wb = a.split(), b.split()
    shorter, longer = (wa, wb) if len(wa) <= len(wb) else (wb, wa)
    return longer[: len(shorter)] == shorter


def _typed_compatible(slot: str, a: str, b: str) -> bool:
    kind = slot[2:].split(":", 1)[0]
    if kind == "date":
        return _dates_compatible(a, b)
    if kind in ("money", "qty", "count"):
        try:
            return abs(float(a) - float(b)) <= 0.02 * max(abs(float(a)), abs(float(b)), 1e-9)  # "6.2 miles" is 10 km
        except ValueError:
            return False
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
        try:
            return abs(float(a) - float(b)) <= 1e-6 * max(abs(float(a)), 1.0)
        except ValueError:
            return False
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


def about_the_same(a: Statement, b: Statement, matcher: Matcher) -> bool:
    """One slot, one subject, one scope; a value typed on its own ("v.date") needs a matching subject."""
    if a.slot != b.slot and (family(a.slot) != family(b.slot) or not (a.slot.startswith("v.") or b.slot.startswith("v."))):
        return False
    if (a.slot.startswith("v.") or b.slot.startswith("v.")) and not matcher.same_subject(a, b):
        return False
    return matcher.same_scope(a, b)


def conflicts(a: Statement, b: Statement, matcher: Matcher = Matcher()) -> bool:
    """Whether `b` (said after `a`) contradicts it. A new run of a step with other arguments
    ("retry with 150 euros") does not: a parameter that changes from step to step is no clash."""
    if b.step or (a.negated and b.negated) or not about_the_same(a, b, matcher):
        return False
    if a.slot.startswith("v.") and a.request and b.request and not (b.changes or b.correction):
        return False  # "show me page 1" … "show me page 2": successive steps, each with its argument
    if a.slot == "v.act":  # one action, said to be done and not done
        return a.negated != b.negated and _overlap(a.value, b.value) >= 0.5
    if a.negated != b.negated:
        return a.value == b.value  # "I don't want a luxury hotel" / "I want a luxury hotel"
    return not compatible(family(a.slot), a.value, b.value)


def _overlap(a: str, b: str) -> float:
    wa, wb = set(a.split()), set(b.split())
    return len(wa & wb) / len(wa | wb) if wa | wb else 0.0


def duplicates(a: Statement, b: Statement, matcher: Matcher = Matcher()) -> bool:
    if a.slot == "v.act":
        return False  # a clause said twice is not a fact to count
    return a.negated == b.negated and compatible(family(a.slot), a.value, b.value) and about_the_same(a, b, matcher)


def clash_type(newer: Statement, simultaneous: bool) -> str:
    if newer.kind == "preference":
        return CONTRADICTORY_PREFERENCES
    if newer.kind == "fact" or simultaneous:
        return CONFLICTING_FACTS  # with no order, neither value is the outdated one
    return OUTDATED_INFORMATION


# ----------------------------------------------------------------------------- the local detector


def inherit_qualifiers(found: list[Located]) -> list[Located]:
    """Complete statements that lean on the conversation (`found` is in conversation order):

    - a price level with no domain ("we want to go luxury") takes the domain of the nearest
      price statement that has one (earlier first), else "general";
    - a changed date or time with no event ("make it 7:30pm instead") takes the event of the
      latest earlier date or time, and is dropped when there is none;
    - a count with no qualifier ("make it 3 nights") takes the qualifier of the latest earlier
      count of the same thing ("2 nights in Rome").
    """
    out: list[Located] = []
    for i, loc in enumerate(found):
        slot = loc.st.slot
        if slot.startswith("tier.") and _domain_of(slot) == "":
            loc = _with_domain(loc, found, i)
        elif slot in ("date.?", "time.?"):
            family = slot[:5]
            earlier = [l for l in reversed(out) if l.st.slot.startswith(family) and l.st.slot != slot]
            if not earlier:
                continue
            loc = replace(loc, st=replace(loc.st, slot=earlier[0].st.slot, label=earlier[0].st.label))
        elif slot.startswith("count.") and ">" not in slot:
            earlier = [l for l in reversed(out) if l.st.slot.split(">", 1)[0] == slot and ">" in l.st.slot]
            if earlier:
                loc = replace(loc, st=replace(loc.st, slot=earlier[0].st.slot))
        out.append(loc)
    return out


def _with_domain(loc: Located, found: list[Located], i: int) -> Located:
    tiers = [l for l in found if l.st.slot.startswith("tier.") and _domain_of(l.st.slot)]
    earlier = [l for l in tiers if l.order < loc.order]
    later = [l for l in tiers if l.order > loc.order]
    ref = earlier[-1] if earlier else later[0] if later else None
    domain = _domain_of(ref.st.slot) if ref else "general"
    label = f"{domain} preference" if domain != "general" else "price level"
    return replace(loc, st=replace(loc.st, slot=loc.st.slot.replace("tier.", f"tier.{domain}", 1), label=label))


def _domain_of(slot: str) -> str:
    return slot.split(".", 1)[1].split("@", 1)[0].split(">", 1)[0]


def local_clashes(found: Iterable[Located], matcher: Matcher | None = None) -> list[Clash]:
    """Every contradicting pair (older, newer) per slot, and the nearest duplicate of each statement."""
    matcher = matcher or Matcher()
    matcher.prepare(loc.st for loc in found)
    ordered = inherit_qualifiers(sorted(found, key=lambda l: l.order))
    by_slot: dict[str, list[Located]] = {}
    for loc in ordered:
        by_slot.setdefault(family(loc.st.slot), []).append(loc)
    clashes: list[Clash] = []
    for items in by_slot.values():
        for j, newer in enumerate(items):
            duplicate_seen = False
            for older in reversed(items[:j]):
                if conflicts(older.st, newer.st, matcher):
                    clashes.append(make_clash(older, newer))
                elif not duplicate_seen and older.message != newer.message and duplicates(older.st, newer.st, matcher):
                    clashes.append(Clash(DUPLICATE_FACTS, older, newer, simultaneous=False))
                    duplicate_seen = True
    clashes += related_clashes(ordered, matcher, {(id(c.older), id(c.newer)) for c in clashes})
    return sorted(clashes, key=lambda c: (c.newer.order, c.older.order))


def related_clashes(ordered: list[Located], matcher: Matcher, taken: set[tuple[int, int]]) -> list[Clash]:
    """Clashes across slots (relate.py): polarity flips on one object, values said to replace an
    earlier one, meal choices a diet excludes; only between messages. A pair is looked at only
    when one of the relations can hold (refusals and replacements are few), so the cost stays
    near linear in the number of statements."""
    out: list[Clash] = []
    refusals: list[int] = []
    diets: list[int] = []
    for j, newer in enumerate(ordered):
        b = newer.st
        target = replaced(b, [loc.st for loc in ordered[:j] if loc.message != newer.message], matcher) if b.replaces else None
        pool = set(range(j)) if b.negated else set(refusals)
        pool |= set(diets) if b.slot.startswith(("diet", "meal")) else set()
        for i in sorted(pool):
            older = ordered[i]
            a = older.st
            if older.message == newer.message or (id(older), id(newer)) in taken:
                continue
            if polarity_flip(a, b) or diet_excludes(a, b):
                out.append(make_clash(older, newer))
                taken.add((id(older), id(newer)))
        if target is not None:
            older = next(loc for loc in ordered[:j] if loc.st is target)
            if (id(older), id(newer)) not in taken and (target.slot == "v.act" or not compatible(family(b.slot), target.value, b.value)):
                out.append(make_clash(older, newer))
                taken.add((id(older), id(newer)))
        if b.negated:
            refusals.append(j)
        if b.slot.startswith(("diet", "meal")):
            diets.append(j)
    return out


def make_clash(older: Located, newer: Located, detector: str = "local", type_: str | None = None) -> Clash:
    simultaneous = older.message == newer.message and not newer.st.changes
    return Clash(type_ or clash_type(newer.st, simultaneous), older, newer, simultaneous, detector)
