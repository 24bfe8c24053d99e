"""Clash with memory: a new memory that contradicts a live one, settled by the clash strategy.

The comparison is the clash policy's own (text/statements/compare.py: `conflicts` and `duplicates` over typed
statements, slot by slot), run between the new memory's statements and those of the user's live
memories on the same slot families; it works whether or not the conversation-level clash policy is
enabled. Outcomes per older memory:

    prefer_recent, merge   the older memory is superseded by the newer (kept as history)
    keep_existing          the newer one is stored already superseded by the older
    ask_user               both stay live; the proxy asks the user which holds, and the answer
                           supersedes one of them or keeps both (ask.py, policy.py)
A new memory whose every statement repeats a live memory's is a duplicate: it merges into that one.

Supersede is keyed on the slot *of the same thing*: "my budget for the wedding is 20,000 euros" and
"my budget for the new laptop is 1,500 euros" fill one slot (amount.budget.total.max.eur) but are two
budgets, both live. The clash comparison reads a qualifier before the shared head ("training budget")
as another scope; a thing named after it ("budget for the laptop") is caught here: when the two
subjects both name the slot's head ("budget"), share no word beyond what the slot names, and each names
something of its own, and those are not close in meaning (the matcher's embedder; without one,
different words decide), they are two things.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from ..text.statements.compare import RELATIVE_DATE, conflicts, duplicates, value_type
from ..text.statements.extract import extract
from ..text.statements.match import SUBJECT_SIMILARITY, Matcher
from ..text.statements.model import Statement
from ..text.statements.subject import words
from .model import Memory


@dataclass
class Comparison:
    contradicted: list[Memory] = field(default_factory=list)  # live memories the new one contradicts
    duplicate_of: Memory | None = None  # a live memory saying the same thing


def compare(statements: tuple[Statement, ...], live: list[Memory], matcher: Matcher | None = None,
            now: float | None = None) -> Comparison:
    """How the new memory's `statements` stand against the `live` memories (oldest first)."""
    matcher = matcher or Matcher()
    today = _day(time.time() if now is None else now)
    families = {value_type(st.slot) for st in statements}
    result = Comparison()
    for memory in live:
        if not families & {value_type(slot) for slot in memory.slots}:
            continue  # no slot in common: nothing to compare (and nothing to re-read)
        older = extract(memory.text)
        if _day(memory.created_at) != today:  # "tomorrow" said yesterday is today: a day counted from then is not comparable
            older = [a for a in older if not a.value.startswith(RELATIVE_DATE)]
        if any(conflicts(a, b, matcher) and not two_things(a, b, matcher) for a in older for b in statements):
            result.contradicted.append(memory)
        elif result.duplicate_of is None and all(any(duplicates(a, b, matcher) for a in older) for b in statements):
            result.duplicate_of = memory
    return result


def two_things(a: Statement, b: Statement, matcher: Matcher) -> bool:
    """The same slot said of two different things (module docstring): "budget for the wedding" and
    "budget for the laptop" share only "budget", which the slot names already."""
    slot_words = set(re.split(r"[.:_ ]", f"{a.slot}.{b.slot}"))
    wa, wb = words(a.subject), words(b.subject)
    if not (wa & slot_words and wb & slot_words):
        return False  # the slot's head not named on both sides: "I live in Berlin" … "I moved to Austin"
    if (wa & wb) - slot_words:
        return False  # a word of the thing itself in common: "hotel budget" … "on hotels"
    own_a, own_b = wa - wb - slot_words, wb - wa - slot_words
    if not own_a or not own_b:
        return False  # one side names no thing of its own: "actually my budget is 300" updates it
    cosine = matcher.phrase_cosine(" ".join(sorted(own_a)), " ".join(sorted(own_b)))
    return cosine is None or cosine < SUBJECT_SIMILARITY


def _day(ts: float) -> int:
    return int(ts // 86400)
