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
  A noun refused with "no"/"any" also flips with a later word or noun phrase that names it in
  another form or, with an embedder, names a kind of it: "I don't have any allergies" / "I'm
  allergic to latex", "we don't own pets" / "we've got a beagle, so dogs must be allowed".
- a meal choice the user's own diet excludes: "I'm vegetarian" … "I'll have the steak".

Statements about someone else ("my sister is vegan") never pair with the user's own, and a new
run of a step ("retry with 150 euros") is no clash, as in the slot comparison.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

from ..cache import cache_short
from ..text.statements.compare import for_another, same_kind, value_type
from ..text.statements.extract import statements_size
from ..text.statements.lexicon import WHICH_OF_SERIES, diet_allows
from ..text.statements.match import Matcher, two_of_a_series
from ..text.statements.model import Statement
from ..text.statements.subject import lemma, words, words_of

NAMED = ("v.name", "v.id", "v.attr")  # typed values that name a thing: one word of them is an object


def _is_like(st: Statement) -> bool:
    return st.slot.startswith("like.")


def _words_size(args: tuple[Any, ...], words: frozenset[str]) -> int:
    return statements_size(args[:1]) + 70 * len(words)  # the statement it keeps alive, and the set


@cache_short(maxsize=32768, sizeof=_words_size)
def object_words(st: Statement) -> frozenset[str]:
    """What is asked for or refused: the clause's content, a named value, an opinion's object."""
    if st.slot == "v.act":
        return frozenset(st.value.split())
    if _is_like(st):
        return frozenset(lemma(w) for w in st.slot.split(".", 1)[1].split())
    if st.slot.split(":", 1)[0] in NAMED:  # the words said and the canonical value ("spicy" is "hot")
        return frozenset(st.value.split()) | frozenset(lemma(w) for w in words_of(st.display))
    return frozenset()


@cache_short(maxsize=32768, sizeof=_words_size)
def content_words(st: Statement) -> frozenset[str]:
    """Everything the statement is about: its subject words and its object."""
    return frozenset(words(st.subject)) | object_words(st)


def _specific(st: Statement) -> bool:
    return st.slot != "v.act"


def _contained(a: Statement, b: Statement, matcher: Matcher | None = None) -> bool:
    """Whether `a`'s object is part of what `b` is about."""
    if a.refused and for_another(a, b):
        return False  # "no tip for the taxi" … "add a tip for the driver": another one
    if a.refused and set(a.refused) <= content_words(b):
        return True  # "no chrome anywhere" … "let's get polished chrome"
    if a.refused and a.negated and not b.negated and _kin(a.refused, b, matcher):
        return True  # "no allergies" … "I'm allergic to latex"; "no pets" … "we have a dog"
    obj = object_words(a)
    if not obj or not obj <= content_words(b):
        return False
    # a correction that says what it takes back names it in one word: "the allergy is to sulfa, not penicillin"
    return _specific(a) or len(obj) >= 2 or (a.correction and a.negated)


KIN_SIMILARITY = 0.35  # cosine (wordllama) above which a refused noun and a word or phrase said later name one kind of thing
STEM = 5  # letters two words must share from their start, up to the shorter one's last two, to be one word


def _stem_kin(a: str, b: str) -> bool:
    """One word in two forms ("allergy" / "allergic", "effect" / "effective")."""
    n = len(os.path.commonprefix((a, b)))
    return n >= STEM and n >= min(len(a), len(b)) - 2


def _kin(refused: tuple[str, ...], b: Statement, matcher: Matcher | None) -> bool:
    """Whether `b` names the refused thing or a kind of it: a word of it is the refused noun in
    another form, or, with an embedder, a word or a noun phrase of its subject is close in meaning
    to the refused noun ("pets" / "a dog", "debt" / "student loan payments")."""
    head = refused[-1]
    other = [w for w in content_words(b) if len(w) > 2 and w != "|" and not w.startswith("@")]
    if any(_stem_kin(head, w) for w in other):
        return True
    if matcher is None or matcher.embedder is None:
        return False
    phrase = " ".join(refused)
    candidates = list(dict.fromkeys(other + _phrases(b.subject)))
    matcher.prepare_phrases([phrase, *candidates])
    return any((matcher.phrase_cosine(phrase, w) or 0.0) >= KIN_SIMILARITY for w in candidates)


def _phrases(subject: tuple[str, ...]) -> list[str]:
    """The runs of adjacent words in a subject ("student loan payment")."""
    runs = " ".join(w.lstrip("^") for w in subject if not w.startswith("@")).split("|")
    return [r.strip() for r in runs if " " in r.strip()]


def polarity_flip(a: Statement, b: Statement, matcher: Matcher | None = None) -> bool:
    """One object, refused on one side and asked for on the other (`b` said after `a`)."""
    if a.negated == b.negated or ("@other" in a.subject) != ("@other" in b.subject):
        return False
    if b.step and not (a.refused and b.adds):  # "no debt" … "add the loan too": an addition, not a new run
        return False
    if a.slot == b.slot and a.slot != "v.act":
        return False  # the slot comparison decides
    if _another_of_series(a, b):
        return False  # "no hotel on the first night" … "book the hotel for the second night"
    return _contained(a, b, matcher) or _contained(b, a, matcher)


def _another_of_series(a: Statement, b: Statement) -> bool:
    """Whether each side names which one of a series it is about, and they name different ones."""
    wa, wb = content_words(a) & WHICH_OF_SERIES, content_words(b) & WHICH_OF_SERIES
    return bool(wa and wb and not wa & wb)


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
    # whose: a request is the user's even when it names someone's place ("send them to my parents' house instead")
    own = [st for st in earlier if not st.negated and not st.step and not two_of_a_series(st, newer)
           and (("@other" in st.subject) == ("@other" in newer.subject) or newer.request)]
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
