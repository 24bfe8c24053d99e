"""Clashes between statements that do not share a slot: what the slot-by-slot comparison misses.

Preferences are often said without a typed value, and the two sides of a change are often read
by different rules. Three relations pair them:

- a polarity flip on one object: something refused in one message and asked for in another.
  The refused object's words must be contained in what the other statement is about: "Include
  the test files" / "Do not include the test files"; "I hate flying" / "flying is fine";
  "Output the report as a CSV file" / "a JSON file rather than CSV"; "Send me a daily summary"
  / "Stop sending the daily summary". A clause needs two shared words, a name or an opinion's
  object one: a lone shared verb is not one action.
- a replacement: a value put "instead" of another ("rather than", "switch to", "make it"), or
  given in a correction ("sorry, I was born 12 April 1989"), whose subject matches no earlier
  value of its type replaces the latest earlier value of that type: "Ship it to my office in
  Seattle" … "deliver it to my home in Tacoma instead".
- a meal choice the user's own diet excludes: "I'm vegetarian" … "I'll have the steak".

Statements about someone else ("my sister is vegan") never pair with the user's own, and a new
run of a step ("retry with 150 euros") is no clash, as in the slot comparison.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Sequence

from ..text.statements.compare import same_kind, value_type
from ..text.statements.lexicon import diet_allows
from ..text.statements.match import Matcher
from ..text.statements.model import Statement
from ..text.statements.subject import lemma, words, words_of

NAMED = ("v.name", "v.id", "v.attr")  # typed values that name a thing: one word of them is an object


def _is_like(st: Statement) -> bool:
    return st.slot.startswith("like.")


@lru_cache(maxsize=32768)
def object_words(st: Statement) -> frozenset[str]:
    """What is asked for or refused: the clause's content, a named value, an opinion's object."""
    if st.slot == "v.act":
        return frozenset(st.value.split())
    if _is_like(st):
        return frozenset(lemma(w) for w in st.slot.split(".", 1)[1].split())
    if st.slot.split(":", 1)[0] in NAMED:  # the words said and the canonical value ("spicy" is "hot")
        return frozenset(st.value.split()) | frozenset(lemma(w) for w in words_of(st.display))
    return frozenset()


@lru_cache(maxsize=32768)
def content_words(st: Statement) -> frozenset[str]:
    """Everything the statement is about: its subject words and its object."""
    return frozenset(words(st.subject)) | object_words(st)


def _specific(st: Statement) -> bool:
    return st.slot != "v.act"


def _contained(a: Statement, b: Statement) -> bool:
    """Whether `a`'s object is part of what `b` is about."""
    if a.refused and set(a.refused) <= content_words(b):
        return True  # "no chrome anywhere" … "let's get polished chrome"
    obj = object_words(a)
    if not obj or not obj <= content_words(b):
        return False
    return _specific(a) or len(obj) >= 2


def polarity_flip(a: Statement, b: Statement) -> bool:
    """One object, refused on one side and asked for on the other (`b` said after `a`)."""
    if a.negated == b.negated or b.step or ("@other" in a.subject) != ("@other" in b.subject):
        return False
    if a.slot == b.slot and a.slot != "v.act":
        return False  # the slot comparison decides
    return _contained(a, b) or _contained(b, a)


def diet_excludes(a: Statement, b: Statement) -> bool:
    """A meal choice and a diet of the user's that leaves it out, in either order."""
    pair = {a.slot.split("@", 1)[0]: a, b.slot.split("@", 1)[0]: b}
    diet, meal = pair.get("diet"), pair.get("meal")
    if diet is None or meal is None or diet.negated or meal.negated:
        return False
    return not diet_allows(diet.value, meal.value)


def replaced(newer: Statement, earlier: Sequence[Statement], matcher: Matcher) -> Statement | None:
    """The earlier statement `newer` says it replaces: the latest earlier value of its type when
    it names no subject of its own that was said before ("deliver it to Tacoma instead"), else
    the latest earlier clause said without a typed value about the same subject ("use tabs for
    indentation" … "switch to 4 spaces for indentation"); None when there is nothing to replace."""
    if not (newer.replaces or newer.correction) or newer.negated or newer.step or not value_type(newer.slot).startswith("v."):
        return None
    own = [st for st in earlier if not st.negated and not st.step and ("@other" in st.subject) == ("@other" in newer.subject)]
    if newer.slot != "v.act":
        same_type = [st for st in own if st.slot != "v.act" and same_kind(st.slot, newer.slot)]
        if any(matcher.same_subject(st, newer) for st in same_type):
            return None  # the slot comparison pairs it by subject
        if same_type:
            return same_type[-1]
    clauses = [st for st in own if st.slot == "v.act" and matcher.same_subject(st, newer) and _other_object(st, newer)]
    return clauses[-1] if clauses else None


def _other_object(older: Statement, newer: Statement) -> bool:
    """Whether the newer statement asks for something the older clause does not already say."""
    old, new = content_words(older), object_words(newer) or content_words(newer)
    if newer.slot == "v.act":
        return bool(new - old) and bool(old - new)
    return not set(newer.value.split()) <= old
