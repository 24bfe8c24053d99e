"""ask_user for memories: a new memory contradicts a live one, and the user is asked which holds.

The request that wrote the contradicting memory is answered by the proxy with a short question
(the upstream is not called), as the clash policy does for a conversation; the question is
remembered in the session's state (session.py, `Pending`), and the user's next turn in that session
is read as the answer:

    an option number     a closed set: 1 / one / first, 2 / two / second, 3 / three / third / both
    a restatement        the reply's statements compared with each memory's, with the comparison
                         superseding uses (text/statements/compare.py `duplicates`), or a statement
                         of the reply with the same value as one of them ("luxury", "the budget one")
Anything else settles nothing: both memories stay live and the question is not asked again.
"""

from __future__ import annotations

import re
from typing import Literal

from ..text.statements.compare import duplicates
from ..text.statements.extract import extract
from ..text.statements.match import Matcher
from ..text.statements.model import Statement

Choice = Literal["older", "newer", "both"]

# The option numbers, and nothing else: the question offers 1, 2 and 3 (3 is "both").
_OPTIONS: dict[str, Choice] = {"1": "older", "one": "older", "first": "older", "2": "newer", "two": "newer",
                               "second": "newer", "3": "both", "three": "both", "third": "both", "both": "both"}
_OPTION_PREFIX = ("option", "number", "the")  # "option 2", "number 1", "the first"
_WORD = re.compile(r"[a-z0-9]+")
MAX_OPTION_WORDS = 4  # "2", "option 2 please", "the second one": a reply that is only a choice


def _quote(text: str, limit: int = 160) -> str:
    text = " ".join(text.split()).rstrip(".!;,")
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def question(older: str, newer: str) -> str:
    """The question naming both memories (a pure function of them: asked the same way every time)."""
    first, second = _quote(older), _quote(newer)
    return (f'Earlier you said "{first}"; now you said "{second}". Which should I keep?\n'
            f"1. {first}\n2. {second}\n3. Both\n"
            "Reply with 1, 2 or 3, or in your own words.")


def parse_choice(reply: str, older: str, newer: str, matcher: Matcher | None = None) -> Choice | None:
    """Which memory the user's reply keeps, or None when it cannot be told."""
    by_statement = _by_statement(reply, older, newer, matcher or Matcher())
    if by_statement is not None:
        return by_statement
    words = _WORD.findall(reply.lower().replace("#", " "))
    while words and words[0] in _OPTION_PREFIX:
        words = words[1:]
    if words and len(words) <= MAX_OPTION_WORDS:
        return _OPTIONS.get(words[0])
    return None


def _by_statement(reply: str, older: str, newer: str, matcher: Matcher) -> Choice | None:
    said = [st for st in extract(reply) if not st.slot.startswith("v.num")]
    if not said:
        return None
    keeps_older, keeps_newer = _restates(said, extract(older), matcher), _restates(said, extract(newer), matcher)
    if keeps_older != keeps_newer:
        return "older" if keeps_older else "newer"
    return None


def _restates(said: list[Statement], memory: tuple[Statement, ...], matcher: Matcher) -> bool:
    for a in said:
        for b in memory:
            if duplicates(b, a, matcher):
                return True
            if a.value == b.value and a.negated == b.negated:
                return True  # a few words naming the value: "luxury", "keep the budget one"
    return False
