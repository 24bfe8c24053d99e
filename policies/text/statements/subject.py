"""What a statement is about: the subject words of its clause, and which of them say "which one".

The subject of a value is the clause it is stated in, less the value itself and the words that
carry no topic (articles, pronouns, auxiliaries, discourse markers). Words keep their order, so
the detector can tell a head noun from the words that qualify it: in "the Q3 infrastructure
budget" and "the training budget" the shared head is "budget" and its qualifiers differ, so the
two values are about two budgets. Capitalised words and words with digits ("Paris", "Q3") are
marked with a leading "^": they name which thing whatever their position.
"""

from __future__ import annotations

import re

from ...cache import cache_short
from .lexicon import MONTH, ORDINALS, WEEKDAY
from .model import Sentence

FUNCTION_WORDS = set("""
a an the this that these those my our your his her their its it it's its i i'm i'd i'll i've me we we're we'd we'll
we've us you you're he she they them there here is are was were be been being am will would shall should can could
may might must do does did done have has had having to of in on at for by with from into onto as than then so and
or but not no nor if also just only still now please thanks thank really actually again too very quite about around
roughly approximately some any all each every one ones what which who whom whose when where why how let let's lets
up out over off down back both either neither yes yeah ok okay hi hey oh well sorry oops correction update wait
instead rather after right sure mean meant said think thought want wants wanted like would need needs needed
make made get got keep going gonna go goes new current updated revised final total overall whole same max maximum
min minimum exact actual real entire full anything everything something nothing way thing things stuff
anywhere everywhere throughout whatsoever ever
""".split())
GAP = "|"  # between two subject words that are not next to each other in the text
_WORD = re.compile(r"\w[\w'’-]*")  # a quote before a word is not part of it ("'All 180 respondents …'")
_OBJECT_NEXT = re.compile(r"\s+(?:the|a|an|my|our|your|this|that|these|those|it|them|me|us|all|every|each)\b")


def lemma(word: str) -> str:
    """A crude singular: enough to make "nights" and "night", "tickets" and "ticket" one word."""
    w = word.lower().replace("’", "'")
    if w.endswith("'s"):
        w = w[:-2]
    w = w.rstrip("'")  # "parents'": a plural's possessive
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]  # and on: "meetings" is cut as "meeting" is
    for ending in ("ing", "ed"):  # "signed" / "sign", "sending" / "send"; both sides are cut alike
        if len(w) > len(ending) + 3 and w.endswith(ending):
            stem = w[: -len(ending)]
            return stem[:-1] if len(stem) > 3 and stem[-1] == stem[-2] and stem[-1] not in "lsz" else stem
    return w


def subject_of(s: Sentence, vstart: int, vend: int, values: list[tuple[int, int]] = (), *, action: bool = False) -> tuple[str, ...]:
    """The subject words of the value at sentence-relative [vstart, vend): its clause, in order,
    without the value, other values of the clause, function words and a leading imperative verb
    (kept, unless listed as one, when the clause itself is the `action`: "minify the bundle")."""
    c0, c1 = s.clause(vstart)
    spans = [(vstart, vend), *values]
    out: list[str] = ["@other"] if s.third_party_at(vstart) else []
    first = True
    for m in _WORD.finditer(s.text, c0, c1):
        raw = m.group(0)
        low = raw.lower().replace("’", "'")
        leading, first = first, False
        if leading and (s.imperative or (c0 == 0 and not action and _OBJECT_NEXT.match(s.lower, m.end()))):
            continue  # "Set the batch size to 64", "Store the logs in S3": the verb is the request, not the topic
        if low in FUNCTION_WORDS or any(a <= m.start() < b for a, b in spans):
            if out and out[-1] != GAP:
                out.append(GAP)  # words apart in the text are not a head and its qualifier
            continue
        digits = any(ch.isdigit() for ch in raw) and any(ch.isalpha() for ch in raw) and "-" not in raw
        digits = digits or (raw.isdigit() and bool(out) and out[-1] != GAP)  # "phase 2": the number says which phase
        marked = (raw[0].isupper() and m.start() > 0) or digits
        out.append(("^" if marked else "") + lemma(low))
    while out and out[-1] == GAP:
        out.pop()
    return tuple(out)


@cache_short(maxsize=4096)  # by bytes too: a sentence may be a whole pasted log
def topic_words(text: str) -> frozenset[str]:
    """Every content word of a sentence, as subject words are written: a value's subject is its
    clause, but the sentence around it says what the clause leaves out ("the kitchen backsplash,
    the area's 30 square feet")."""
    return frozenset(lemma(w) for w in _WORD.findall(text) if w.lower().replace("’", "'") not in FUNCTION_WORDS)


# an ordinal that picks one of a series, said after a determiner or opening the sentence ("first
# drill:", "the second half", "her 3rd round"); not a second of time ("30 seconds"), an adverb
# ("book it first"), a class of travel ("first class") nor a day of a month ("june 1st", "the 3rd")
_ORDINAL = re.compile(
    r"(?:^\W*|\b(?:the|my|our|your|her|his|their|its|this|that|these|those)\s+|'s\s+)"
    rf"({'|'.join(ORDINALS)}|[1-9](?:st|nd|rd|th))\b"
    r"(?!-|\s+(?:of all|and foremost|thoughts?|time|hand|opinion|language|nature|class)\b|\s+of\s+" + MONTH + r")"
)
_DAY_OF_MONTH = re.compile(r"\b(?:" + MONTH + "|" + WEEKDAY + r")(?:\s+the)?\s+$")
_ENDS_PHRASE = re.compile(r"\s*(?:$|[^\w\s-])")  # "on the 3rd.", "the night of the 9th,"
_ORDINAL_NUMBER = {w: str(i) for i, w in enumerate(ORDINALS, 1)}


def series_of(lower: str, value: tuple[int, int] = (0, 0)) -> frozenset[str]:
    """The positions in a series a sentence names ("for the second half" -> {"2"}), less any
    inside the span of the value the statement is about ("the 3rd floor" as the floor said)."""
    return frozenset(position for position, start, end in _ordinals(lower) if not (start < value[1] and value[0] < end))


@cache_short(maxsize=4096)
def _ordinals(lower: str) -> tuple[tuple[str, int, int], ...]:
    """(position, start, end) of each ordinal of a series in a sentence: read once per sentence,
    however many statements it holds."""
    return tuple(
        (_ORDINAL_NUMBER.get(m.group(1), m.group(1)[:1]), m.start(1), m.end(1)) for m in _ORDINAL.finditer(lower)
        if not _DAY_OF_MONTH.search(lower, max(0, m.start(1) - 16), m.start(1))
        and not (m.group(1)[0].isdigit() and _ENDS_PHRASE.match(lower, m.end(1)))
    )


def words_of(text: str) -> list[str]:
    """The words of a literal ("spicy food" → ["spicy", "food"])."""
    return _WORD.findall(text.lower())


def words(subject: tuple[str, ...]) -> set[str]:
    return {w.lstrip("^") for w in subject if w != GAP and not w.startswith("@")}


def qualifiers(subject: tuple[str, ...], shared: set[str]) -> set[str]:
    """Words of `subject` the other side lacks that say which thing: a word just before a shared
    word (a qualifier of a shared head: "training budget"), or a marked word (a name, a code)."""
    out = set()
    for i, w in enumerate(subject):
        bare = w.lstrip("^")
        if bare in shared or w == GAP or w.startswith("@"):
            continue
        before_shared = i + 1 < len(subject) and subject[i + 1].lstrip("^") in shared
        if w.startswith("^") or before_shared:
            out.add(bare)
    return out


def different_scope(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[set[str], set[str]] | None:
    """The qualifiers that set two subjects apart ("q3 infrastructure" / "training"), when each
    side has its own; None when one subject can be the other said more briefly."""
    if ("@other" in a) != ("@other" in b):
        return {"someone else"}, {"the user"}  # whose: the user's value and another person's
    shared = words(a) & words(b)
    qa, qb = qualifiers(a, shared), qualifiers(b, shared)
    return (qa, qb) if qa and qb else None
