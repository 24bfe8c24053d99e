"""The planner's per-unit view of a body (units, their counts, costs), carried to the session's next
request, so an agent's step groups and counts only what it added.

An agent sends its whole history again at every step. Grouping it into units and summing every
unit's tokens was a Python pass per message on every request (~0.3 ms at 120 messages, growing
with the history). The view of the session's last body is kept (per session, in the policy); a
body whose messages before that body's last unit have the same keys, token counts and times (a list
comparison: the carried lists hold the same objects) takes those units and their columns as they
were, and only its last unit onwards is grouped and counted again. Units before the last one are
closed (a message after each was not part of it), and grouping runs left to right, so they are what
a pass from the start makes. Pure; no I/O.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..messages import Message, group_exchanges
from .events import Units

ENDS_REQUEST = ("user", "tool", "function")


class Columns:
    """Per message: the keys, tokens and times the view was made of (what a reuse is checked on);
    per unit: its messages and the planner's columns (events.Units), and its costs (compose.UnitCosts:
    tokens of what was said, of each tool result)."""

    __slots__ = ("hashes", "tokens", "times", "units", "starts", "sizes", "unit_tokens", "is_user", "ends_request",
                 "unit_times", "said", "results")

    def __init__(self) -> None:
        self.hashes: list[str] = []
        self.tokens: list[int] = []
        self.times: list[float | None] = []
        self.units: list[list[int]] = []
        self.starts: list[int] = []
        self.sizes: list[int] = []
        self.unit_tokens: list[int] = []
        self.is_user: list[bool] = []
        self.ends_request: list[bool] = []
        self.unit_times: list[float | None] = []
        self.said: list[int] = []
        self.results: list[tuple[int, ...]] = []

    def view(self) -> Units:
        return Units(self.starts, self.sizes, self.unit_tokens, self.is_user, self.ends_request, self.unit_times)

    def bytes(self) -> int:
        """About what it holds: ~400 bytes a message (a probe of bench/fuzz.py's proxy measured ~590 with
        the keys, which the carried lists share while they hold the same body; at 200 the views held
        2.6x their bound)."""
        return 500 + 400 * len(self.hashes)


def reusable_units(previous: Columns | None, hashes: list[str], tokens: list[int], times: list) -> int:
    """How many of `previous`'s units a body with these per-message lists takes as they are: all but
    its last, when the messages before that one are the same, and that one too (it closed the unit
    before it: a tool answer there would have joined it); else none."""
    if previous is None or len(previous.units) < 2:
        return 0
    start = previous.units[-1][0]
    if len(hashes) <= start or hashes[:start + 1] != previous.hashes[:start + 1] \
            or tokens[:start] != previous.tokens[:start] or times[:start] != previous.times[:start]:
        return 0
    return len(previous.units) - 1


def unit_columns(messages: Sequence[Message], roles: Sequence[Any], hashes: list[str], tokens: list[int], times: list,
            previous: Columns | None = None) -> Columns:
    """The view of a body (`roles`, `hashes`, `tokens`, `times`: one per message), from `previous`'s
    units where `reusable_units` allows, the rest grouped and counted now."""
    kept = reusable_units(previous, hashes, tokens, times)
    out = Columns()
    out.hashes, out.tokens, out.times = hashes, tokens, times
    if kept:
        assert previous is not None
        for name in Columns.__slots__[3:]:
            setattr(out, name, getattr(previous, name)[:kept])
    start = out.units[-1][-1] + 1 if kept else 0
    for unit in group_exchanges(messages, start):
        first, last = unit[0], unit[-1]
        out.units.append(unit)
        out.starts.append(first)
        out.sizes.append(len(unit))
        out.unit_tokens.append(sum(tokens[first:last + 1]))  # a unit is a run of messages
        out.is_user.append(roles[first] == "user")
        out.ends_request.append(roles[last] in ENDS_REQUEST)
        known = [times[i] for i in unit if times[i] is not None]
        out.unit_times.append(max(known) if known else None)
        out.said.append(sum(tokens[i] for i in unit if roles[i] != "tool"))
        out.results.append(tuple(tokens[i] for i in unit if roles[i] == "tool"))
    return out
