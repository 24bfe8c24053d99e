"""What a plain number stands for, read from the words beside it: a count of the noun after it
("3 floors", "45 degrees"), or an identifier written after its noun ("Step 3", "Room 101",
"Chapter 4"). A number with a unit has its dimension (slots.py); these have only "count".

Two counts of different things are not two values of one slot ("3 lifts" and "45 floors"), and an
identifier says which thing is meant, not a value of it ("Step 3: bring your knees up" and "Step 4:
engage your glutes" are two steps). Read as values of one slot, any two such numbers of a claim and
its evidence were a contradiction: a KB of numbered instructions blocked answers quoting another
step of them at confidence 1.0.
"""

from __future__ import annotations

import re

from .slots import Slot
from .words import FUNCTION_WORDS, stem

LABEL, COUNT = "label", "count"
_AFTER = re.compile(r"(?:[ \t]+[A-Za-z][A-Za-z-]*){1,3}")  # "440 specialty stores", "1,600 German scientists"
_BEFORE = re.compile(r"\b([A-Z][A-Za-z-]*)[ \t]*(?:[Nn]o\.?|#)?[ \t]*$")  # "Step 3", "Room 101", "Flight no. 212"


def _noun(word: str) -> str | None:
    folded = word.lower()
    if folded in FUNCTION_WORDS or folded.endswith("ly"):  # "About 40", "Nearly 300", "Exactly 12"
        return None
    return stem(folded)


def number_reading(text: str, slot: Slot) -> tuple[str, frozenset[str]]:
    """(LABEL, {noun}) for an identifier; (COUNT, the words of what it counts: up to three words after
    it, to the first function word) for a count; (COUNT, {}) for a bare number. `slot` is a number of `text`."""
    before = _BEFORE.search(text, 0, slot.start)
    if before and (noun := _noun(before.group(1))):
        return LABEL, frozenset([noun])
    after = _AFTER.match(text, slot.end)
    counted: list[str] = []
    for word in after.group(0).split() if after else ():
        if (noun := _noun(word)) is None:
            break
        counted.append(noun)
    return COUNT, frozenset(counted)


def same_slot(a: Slot, a_text: str, b: Slot, b_text: str) -> bool:
    """Whether two numbers of the same dimension can be two values of one thing: neither is an
    identifier, and what they count shares a word (or one of them names nothing). Numbers with a
    unit are read by their dimension alone."""
    if a.value[1] != "count" or b.value[1] != "count":
        return True
    kind_a, counted_a = number_reading(a_text, a)
    kind_b, counted_b = number_reading(b_text, b)
    if LABEL in (kind_a, kind_b):
        return False
    return not counted_a or not counted_b or bool(counted_a & counted_b)
