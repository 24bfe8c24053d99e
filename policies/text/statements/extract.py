"""Statements from text: every rule over every sentence, one statement per slot and polarity."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ...cache import cache_short
from .bounds import as_bound
from .generic import clause_statements, typed_statements
from .model import Sentence, Statement, presupposed, split_sentences
from .rules import RULES


def statements_size(found: Sequence[Statement]) -> int:
    """The bytes statements hold, about (within ~25 % of a deep count): ~700 a statement, its strings,
    and the word sets it names (one set is often shared by a sentence's statements: counted once)."""
    sets: dict[int, int] = {}
    size = 200
    for st in found:
        size += 700 + 2 * (len(st.value) + len(st.display) + len(st.label) + len(st.slot))
        for part in (st.context, st.series, st.subject, st.refused, st.refused_for):
            sets[id(part)] = len(part)
    return size + 70 * sum(sets.values())


def _entry_size(args: tuple[Any, ...], found: tuple[Statement, ...]) -> int:
    return 2 * len(args[0]) + statements_size(found)


# A long message is read each time (the clash policy keeps its own); by bytes: ~30 of 4,000 characters (~250 KB each)
@cache_short(maxsize=8192, max_chars=4000, sizeof=_entry_size)
def extract(text: str) -> tuple[Statement, ...]:
    """Every statement in `text` (cached per text: messages are re-sent every turn)."""
    out: list[Statement] = []
    for sentence in split_sentences(text):
        out.extend(_read(sentence))
        for given in presupposed(sentence):
            # the question is the statement's sentence: what an edit marks or cuts, never a fragment of it
            out.extend(replace(st, start=sentence.start, end=sentence.end, given=True) for st in _read(given))
    return tuple(out)


def _read(sentence: Sentence) -> list[Statement]:
    """The statements of one sentence, in the order they appear."""
    found: list[Statement] = []
    for rule in RULES:
        found.extend(rule(sentence))
    specific = _unambiguous(found)
    taken = [(st.vstart, st.vend) for st in found if not st.slot.endswith(".?")]
    generic = _one_day([st for st in typed_statements(sentence) if not any(st.vstart < b and a < st.vend for a, b in taken)])
    claimed = [as_bound(sentence, st) for st in specific + generic]
    whole = [st for st in clause_statements(sentence)
             if not any(other.vstart < st.vend and st.vstart < other.vend for other in found + generic)]  # "Monday, | April 7"
    return sorted(claimed + whole, key=lambda st: (st.start, st.vstart))


def _unambiguous(found: list[Statement]) -> list[Statement]:
    """One statement per slot and polarity in a sentence; a slot given two different positive
    values in one sentence ("between budget and luxury") is a comparison, not a statement."""
    by_slot: dict[str, list[Statement]] = {}
    for st in found:
        by_slot.setdefault(st.slot, []).append(st)
    out: list[Statement] = []
    for items in by_slot.values():
        items = _one_day(items)
        positive = {st.value for st in items if not st.negated}
        if len(positive) > 1:
            continue
        seen: set[tuple[str, bool]] = set()
        for st in items:
            if (st.value, st.negated) not in seen:
                seen.add((st.value, st.negated))
                out.append(st)
    return sorted(out, key=lambda st: (st.start, st.vstart))


def _one_day(items: list[Statement]) -> list[Statement]:
    """A weekday next to a day of the month names one day ("Tuesday the 14th"): the day is the value."""
    days = [st for st in items if st.value[:1] in ("d", "m") and st.value[1:2].isdigit()]
    return [st for st in items if not (st.value.startswith("wd:") and any(
        0 <= d.vstart - st.vend <= 5 or 0 <= st.vstart - d.vend <= 5 for d in days))]
