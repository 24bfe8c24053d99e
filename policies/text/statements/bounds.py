"""Values said as limits: "after 9pm", "no later than 6", "under $1,000", "at least 8GB".

A value after "after", "before", "under" or "at least" is not what something is but a limit on it.
Its value carries the direction (">21:00": at or after 9pm; "<3": at most 3), and a refused limit
is the opposite limit said outright ("nothing after 9pm" is "at or before 21:00"). A budget is a
limit by its slot ("amount.budget.total.max.usd"). A limit and a point clash only when the point
lies outside it: "nothing departing after 9pm" clashes with "book the 11:45pm", "a laptop under
$1,000" does not clash with "order the $800 one". Two limits the same way with different values are
a revised limit, and clash.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from typing import Callable

from .model import Sentence, Statement

_AFTER = re.compile(r"\b(?:after|(?<!no )(?<!not )later than|no earlier than|not earlier than)\s+$")
_BEFORE = re.compile(r"\b(?:before|(?<!no )(?<!not )earlier than|no later than|not later than)\s+$")
# the words of an upper and a lower limit, which the budget rule (values._BOUNDS) reads too
AT_MOST = r"under|below|less than|at most|no more than|not more than|max(?:imum)?"
AT_LEAST = r"over|above|(?<!no )(?<!not )more than|at least|min(?:imum)?"  # not the "more than" of "no more than"
_AT_LEAST = re.compile(rf"\b(?:{AT_LEAST}|no less than|not less than|no fewer than)\s+$")  # searched first: "no less than"
_AT_MOST = re.compile(rf"\b(?:{AT_MOST}|(?<!no )(?<!not )fewer than)\s+$")
_LIMITED_KINDS = ("v.money:", "v.qty:", "v.count:")  # a bare number ("v.num") is too often a label to be a limit
_DAY_STARTS = 4 * 60  # a time before 4am belongs to the night before: "after 9pm" includes 00:30


def as_bound(s: Sentence, st: Statement) -> Statement:
    """`st` with its value read as a limit when the words just before it make it one."""
    if st.slot.startswith("time.") or st.slot == "v.time":
        upper, lower = _BEFORE, _AFTER
    elif st.slot.startswith(_LIMITED_KINDS):
        upper, lower = _AT_MOST, _AT_LEAST
    else:
        return st
    before = s.lower[: st.vstart - s.start]
    m = lower.search(before) or upper.search(before)
    if not m:
        return st
    op = ">" if m.re is lower else "<"
    if st.negated and not m.group(0).startswith("no"):  # "no later than" is a limit, not a refusal
        op = "<" if op == ">" else ">"
    return replace(st, value=op + st.value, negated=False, substitutable=False)


def limited(st: Statement) -> str:
    """The statement's value with its limit's direction: a budget's slot says it is a maximum."""
    parts = st.slot.split(".")
    if parts[0] == "amount" and len(parts) > 3 and parts[3] in ("max", "min"):
        return ("<" if parts[3] == "max" else ">") + st.value
    return st.value


def direction(value: str) -> str:
    return value[:1] if value[:1] in "<>" else ""


def same_direction(a: Statement, b: Statement) -> bool:
    """Both points, or both limits the same way."""
    return direction(limited(a)) == direction(limited(b))


def limits_compatible(a: str, b: str, number: Callable[[str], float], same: Callable[[str, str], bool]) -> bool:
    """Whether two values, each a point or a limit, can both hold."""
    op_a, op_b = direction(a), direction(b)
    if op_a == op_b:
        return same(a.lstrip("<>"), b.lstrip("<>"))
    ranges = []
    for op, value in ((op_a, a.lstrip("<>")), (op_b, b.lstrip("<>"))):
        n = number(value)
        ranges.append((n, math.inf) if op == ">" else (-math.inf, n) if op == "<" else (n, n))
    return max(ranges[0][0], ranges[1][0]) <= min(ranges[0][1], ranges[1][1])


def _minutes(value: str) -> float:
    hours, minutes = value.split(":")
    m = int(hours) * 60 + int(minutes)
    return m + 24 * 60 if m < _DAY_STARTS else m


def times_compatible(a: str, b: str) -> bool:
    return limits_compatible(a, b, _minutes, str.__eq__)
