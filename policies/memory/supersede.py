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
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..text.statements.compare import RELATIVE_DATE, conflicts, duplicates, value_type
from ..text.statements.extract import extract
from ..text.statements.match import Matcher
from ..text.statements.model import Statement
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
        if any(conflicts(a, b, matcher) for a in older for b in statements):
            result.contradicted.append(memory)
        elif result.duplicate_of is None and all(any(duplicates(a, b, matcher) for a in older) for b in statements):
            result.duplicate_of = memory
    return result


def _day(ts: float) -> int:
    return int(ts // 86400)
