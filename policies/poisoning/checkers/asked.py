"""What the user's question names, read with the evidence's help.

People type questions in lower case ("who first mapped lake varn?", "who founded the kellerman
maritime museum"), and a name is found by its capitals, so such a question names nothing and the
checker cannot tell what it is about. The evidence knows which words are names: a word it only
ever writes with a capital, at least once inside a sentence (so not merely as a sentence's first
word), is a proper noun ("Varn", "Kellerman", "Maritime"). In a question typed without capitals,
runs of such words are read as the names it gives. A question typed with capitals is taken at its
word: its lower-case words are not names.
"""

from __future__ import annotations

import re
from typing import Iterable

from ...text.slots import Slot, name_key, sentence_start
from .readings import slots_of

_WORD = re.compile(r"[^\W\d_][\w'’-]*")


def asked_slots(question: str, evidence: Iterable[str]) -> tuple[Slot, ...]:
    """The question's slots, with the names its lower-case words give (see the module's docstring)."""
    own = slots_of(question)
    if not _typed_lower(question):  # a cased question's lower-case words are not names: its writer said so
        return own
    lower = [m for m in _WORD.finditer(question) if m.group(0).islower() and not _inside(m, own)]
    if not lower:
        return own
    proper = _proper_words(" ".join(evidence), {m.group(0) for m in lower})
    if not proper:
        return own
    runs: list[list[re.Match]] = []
    for m in lower:
        if m.group(0) not in proper:
            continue
        if runs and _adjacent(question, runs[-1][-1], m):
            runs[-1].append(m)
        else:
            runs.append([m])
    found = [_name(question, run[0].start(), run[-1].end()) for run in runs]
    return tuple(sorted(own + tuple(s for s in found if s.value), key=lambda s: s.start))


def _proper_words(text: str, wanted: set[str]) -> set[str]:
    """Of the wanted lower-case words, those the text writes only with a capital, at least once
    inside a sentence."""
    lower, inner = set(), set()
    for m in _WORD.finditer(text):
        key = m.group(0).lower()
        if key not in wanted:
            continue
        if not m.group(0)[:1].isupper():
            lower.add(key)
        elif not sentence_start(text, m.start()):
            inner.add(key)
    return inner - lower


def _typed_lower(text: str) -> bool:
    """Written without capitals (bar the first letter and "I"): casing says nothing about names."""
    rest = re.sub(r"\bI\b|^\W*\w", "", text)
    return not any(c.isupper() for c in rest)


def _name(text: str, start: int, end: int) -> Slot:
    return Slot("name", text[start:end], start, end, name_key(text[start:end]))


def _inside(m: re.Match, slots: tuple[Slot, ...]) -> bool:
    return any(s.start <= m.start() < s.end for s in slots)


def _adjacent(text: str, a: re.Match, b: re.Match) -> bool:
    return not text[a.end():b.start()].strip()
