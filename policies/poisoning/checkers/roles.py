"""The role a name plays in its sentence, and whether a claim's name and an evidence name fill the
same role for the same subject — the test behind a wrong-entity contradiction.

A name's role is read from the words before it: the preposition or copula that links it ("in",
"by", "is") and the content word that governs it ("directed by", "wrote", "stands in"), skipping
determiners ("wrote The Matrix" is "wrote"). "directed by X" and "written by Y" fill different
roles; "stands in Berlin" and "(on the Champ de Mars) in Paris" the same one. A name in a list
("A, B and C") or in a sentence that adds to what is known ("also", "other", "another": "she also
wrote X") fills a role that holds many values, so the KB naming another value is no conflict.
Only the closed classes of English are listed here (determiners, prepositions, additive words).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from ...text.slots import FUNCTION_WORDS, Slot, content_words, fold, negated, stem

DETERMINERS = frozenset("the a an this that these those his her its their our my your".split())
CONJUNCTIONS = frozenset("and or nor".split())
LINKS = frozenset("""
in on at by from of for with to into onto over under between among through during before after
about as than near inside outside within across along around against via per is are was were be
been being named called
""".split())
ADDITIVE = frozenset("also too other others another else besides additionally including".split())
_WORD = re.compile(r"[\w'’\-]+|,")


class Role(NamedTuple):
    link: str  # the preposition or copula before the name ("in", "by", "is"), or ""
    head: str  # the stemmed content word that governs it ("direct", "wrote", "stand"), or ""


def role(text: str, slot: Slot) -> Role | None:
    """The role of `slot` in `text`, or None when it has none (it opens the sentence, it is a list
    member, or only function words precede it)."""
    before = _words_before(text, slot.start, 6)
    while before and before[-1].lower() in DETERMINERS:
        before.pop()
    if not before or before[-1] == "," or before[-1].lower() in CONJUNCTIONS:
        return None
    link = ""
    if before[-1].lower() in LINKS:
        link = before.pop().lower()
        while before and before[-1].lower() in ("also", "not", "only", "then"):
            before.pop()
    head = ""
    if before and _content(before[-1]):
        head = stem(fold(before[-1]))
    if not link and not head:
        return None
    return Role(link, head)


def _content(word: str) -> bool:
    """A lower-case content word (a capitalised one is part of a name: "Champ de Mars in Paris")."""
    return word != "," and word.lower() not in FUNCTION_WORDS and word[:1].islower() and not word.isdigit()


def same_role(a: Role | None, b: Role | None) -> bool:
    """Both link the name the same way, and their governing words (when both have one) agree."""
    if a is None or b is None or a.link != b.link:
        return False
    if a.head and b.head:
        return a.head == b.head
    return bool(a.link)


def additive(text: str) -> bool:
    """The sentence adds a value to what is known rather than stating the one value."""
    return any(w.lower() in ADDITIVE for w in _WORD.findall(text)) or "as well" in text.lower()


# Words are read from a window around a value, not from the whole text: a long claim (a tool
# result with no sentence end) holds hundreds of values, and reading all of it for each was
# quadratic (seconds per request).
_WINDOW = 160


def _words_before(text: str, pos: int, n: int) -> list[str]:
    start = max(0, pos - _WINDOW)
    words = _WORD.findall(text[start:pos])
    if start and words and text[start - 1].isalnum() and text[start].isalnum():  # the window cut a word
        words = words[1:]
    return words[-n:]


def _words_after(text: str, pos: int, n: int) -> list[str]:
    return _WORD.findall(text[pos:pos + _WINDOW])[:n]


def in_list(text: str, slot: Slot) -> bool:
    """A member of a list of values ("2009 and 2010", "X, Y and Z", "X or Y"): the role holds many."""
    before = _words_before(text, slot.start, 2)
    after = [w for w in _words_after(text, slot.end, 3) if w.lower() not in DETERMINERS]
    listed = before[-1:] == [","] and not _apposition(before) and _more_to_come(text, slot.end)
    return (bool(before) and (listed or before[-1].lower() in CONJUNCTIONS)
            or len(after) > 1 and after[0].lower() in CONJUNCTIONS and not after[1][:1].islower()
            or text[slot.end:].lstrip().startswith("&"))


def _more_to_come(text: str, end: int) -> bool:
    """A list goes on to its "and"/"or" ("Oslo, Bergen and Paris"); "Eastmere, Nebraska" is a place
    and its region, not a list of two."""
    rest = re.split(r"[.!?;]", text[end:], maxsplit=1)[0]
    return any(w.lower() in CONJUNCTIONS for w in _WORD.findall(rest))


def _apposition(before: list[str]) -> bool:
    """"the founder, Lena Arden": a comma after a common noun names what the noun is, not a list's
    next item (a list's items are alike: "Oslo, Bergen", "2009, 2010")."""
    return len(before) == 2 and before[0][:1].islower()


_CLAUSE = re.compile(r"[,;:()—–]|\s-\s|\s(?:but|although|though|while|whereas|because|since|so)\s", re.I)
_TITLE_NEGATOR = re.compile(r"(?:\b|(?<=[a-z]))(?:No|Not|Never|None|Nor)\s+(?=[A-Z])")


def clauses(text: str) -> list[str]:
    """The clauses of a sentence: what a negation can scope over ("No, it was written by X":
    the "No" answers the question; "X starred in Y but I haven't seen it": the speaker's own)."""
    out: list[str] = []
    pieces = [c.strip() for c in _CLAUSE.split(text) if c.strip()]
    for n, piece in enumerate(pieces):
        bare = not any(w[:1].islower() and w.lower() not in FUNCTION_WORDS for w in _WORD.findall(piece))
        if bare and out:  # an elliptical clause ("..., but Y is not") restates the one before
            out[-1] = f"{out[-1]}, {piece}"
        elif n + 1 < len(pieces) and (bare and not content_words(piece) or _particle(piece)):
            # "No, it was X", "Unfortunately not — it must be Y": the particle answers with it
            pieces[n + 1] = f"{piece}, {pieces[n + 1]}"
        else:
            out.append(piece)
    return out


def _particle(piece: str) -> bool:
    """A negative answer's particle, said before what it answers with: "No", "Sadly not"."""
    return len(_WORD.findall(piece)) <= 2 and negated(piece)


def negated_statement(text: str, names: list[Slot]) -> bool:
    """A negator outside the names of the text ("No Strings Attached" is a title)."""
    for s in sorted(names, key=lambda s: -s.start):
        text = text[: s.start] + " " * (s.end - s.start) + text[s.end:]
    return negated(_TITLE_NEGATOR.sub(" ", text))
