"""Times said as bounds: "after 9pm", "no later than 6", "nothing departing after 9pm".

A time after "after" or "before" is not the time something happens but a limit on it. Its value
carries the direction (">21:00": at or after 9pm; "<18:00": at or before 6pm), and a refused bound
is the opposite bound said outright ("nothing after 9pm" is "at or before 21:00"), so a later
"book the 11:45pm" is compared with the limit rather than taken for another time.
"""

from __future__ import annotations

import re
from dataclasses import replace

from .model import Sentence, Statement

_AFTER = re.compile(r"\b(?:after|(?<!no )(?<!not )later than|no earlier than|not earlier than)\s+$")
_BEFORE = re.compile(r"\b(?:before|(?<!no )(?<!not )earlier than|no later than|not later than)\s+$")
_DAY_STARTS = 4 * 60  # a time before 4am belongs to the night before: "after 9pm" includes 00:30
_DAY = 24 * 60


def as_bound(s: Sentence, st: Statement) -> Statement:
    """`st` with its time read as a bound when the words before it make it one."""
    if not (st.slot.startswith("time.") or st.slot == "v.time"):
        return st
    before = s.lower[: st.vstart - s.start]
    m = _AFTER.search(before) or _BEFORE.search(before)
    if not m:
        return st
    op = ">" if m.re is _AFTER else "<"
    if st.negated and not m.group(0).startswith("no"):  # "no later than" is a bound, not a refusal
        op = "<" if op == ">" else ">"
    return replace(st, value=op + st.value, negated=False, substitutable=False)


def _minutes(value: str) -> int:
    hours, minutes = value.split(":")
    m = int(hours) * 60 + int(minutes)
    return m + _DAY if m < _DAY_STARTS else m


def times_compatible(a: str, b: str) -> bool:
    """Whether two times, each a point or a bound, can both hold. Two bounds the same way with
    different limits are a revised limit, not two limits that both hold."""
    op_a, op_b = a[:1] if a[:1] in "<>" else "", b[:1] if b[:1] in "<>" else ""
    if op_a == op_b:
        return a == b
    ranges = []
    for op, value in ((op_a, a.lstrip("<>")), (op_b, b.lstrip("<>"))):
        m = _minutes(value)
        ranges.append((m, _DAY + _DAY_STARTS) if op == ">" else (_DAY_STARTS, m) if op == "<" else (m, m))
    return max(ranges[0][0], ranges[1][0]) <= min(ranges[0][1], ranges[1][1])
