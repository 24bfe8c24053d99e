"""How strong the evidence for a clash is, from what the two statements are and where they sit.

The slot comparison finds pairs; whether a pair is the user changing their mind or two values
that merely share a kind ("Case #2" … "Case #3" in two pasted case studies, a log line and a line
of code, "write a Meta Title" … "now write an OG Title") depends on meaning the comparison does not
see. Measured on real conversations nobody here wrote (ShareGPT and BFCL's multi-turn tasks,
`bench/no_harm.py`), the pairs of the generic readers (`v.*` values and `frame.*` actions) were
almost all no clash, also when the later sentence announced a change or both sentences were the
user talking; acting on all of them appended a note to 9 % of the latest user messages. A clash
has strong evidence when

- both statements were read by a typed reader (a location, a price level, a diet, a count of
  people, the date of an event: a `Statement.slot` outside `v.*` and `frame.*`), or
- the later statement says it corrects an earlier one ("sorry, I meant …", "correction: …") and
  both messages are conversational turns (at most `conversational_chars`), not pasted material.

Anything else is a weak clash: reported (`clash.weak`), never acted on. Until a learned verifier
judges pairs by meaning, this keeps the policy from touching ordinary conversations at the cost of
recall (README, "Contradictions").
"""

from __future__ import annotations

from .detect import Clash
from .question import Texts

GENERIC_SLOTS = ("v.", "frame.")
CONVERSATIONAL_CHARS = 400  # a longer message is read as pasted material


def strong(c: Clash, texts: Texts, conversational_chars: int = CONVERSATIONAL_CHARS) -> bool:
    """Whether clash `c` has the evidence an action on it needs (see the module's docstring)."""
    older, newer = c.older.st, c.newer.st
    if not older.slot.startswith(GENERIC_SLOTS) and not newer.slot.startswith(GENERIC_SLOTS):
        return True
    longest = max(len(texts[(c.older.message, c.older.part)]), len(texts[(c.newer.message, c.newer.part)]))
    return newer.correction and longest <= conversational_chars
