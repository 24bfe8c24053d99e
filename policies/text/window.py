"""What of a long text the rules read: all of it up to a size, else its head and its tail.

Reading rules (statement extraction, clause splitting) cost at least linear time in the text,
and a pasted log or file can be megabytes. Past `max_chars`, what a user says about what they
want sits at the start and the end of a message ("here is my log: … why does it fail?"), so the
rules read a window of each, cut at a line or sentence break, and nothing in between.
"""

from __future__ import annotations

_BREAKS = ("\n\n", "\n", ". ", " ")
_SLACK = 400  # how far back from a window's edge to look for a clean break


def analysis_windows(text: str, max_chars: int) -> list[tuple[int, str]]:
    """[(offset, piece)]: the whole text when it fits in `max_chars`, else its head and its tail,
    about `max_chars // 2` characters each, with their offsets in `text`."""
    if len(text) <= max_chars:
        return [(0, text)]
    half = max(1, max_chars // 2)
    head_end = _break_before(text, half)
    tail_start = _break_after(text, len(text) - half)
    return [(0, text[:head_end]), (tail_start, text[tail_start:])]


def _break_before(text: str, at: int) -> int:
    for mark in _BREAKS:
        i = text.rfind(mark, max(0, at - _SLACK), at)
        if i > 0:
            return i + len(mark)
    return at


def _break_after(text: str, at: int) -> int:
    for mark in _BREAKS:
        i = text.find(mark, at, at + _SLACK)
        if i >= 0:
            return i + len(mark)
    return at
