"""Action frames: an action on an object, with where it goes or where it happens.

"Save the cleaned dataset to the raw bucket" is the frame (object "clean dataset", role
"dest", complement "raw bucket"); "Keep the bikes in the garage" is (object "bike", role "loc",
complement "garage"). Two frames of the user's on one object and one role with complements that
share nothing say the object goes, or stays, in two places at once: the later one moves it
(clash/frames.py pairs them). The frame is read by structure: the object is the noun phrase
just before the first place preposition of the clause, the complement what follows it. Values
the typed rules read (dates, amounts, counts) are theirs, not a frame's: a complement holding
one is no place.

An object said as a pronoun ("send it to my office", "it's going to my home address") is the
subject `REFERENT`: the clash policy gives it the object of the frame said before it.

Frames are statements on the slot "frame.<role>", extracted apart from `extract` (only the
clash policy compares them).
"""

from __future__ import annotations

import re
from dataclasses import replace

from .build import stated, stmt
from .model import Sentence, Statement, split_sentences
from .subject import FUNCTION_WORDS, lemma
from .typed import typed_values

_PREPOSITION = re.compile(
    r"\b(?:(?P<dest>into|onto|to)|(?P<loc>next to|close to|in front of|on top of|inside|in|at|on|beside|near|by|under|"
    r"underneath|behind|within|outside))\b"
)
_DETERMINER = re.compile(r"\b(?:the|a|an|my|our|your|this|that|these|those|its|their|his|her)\b")
# verbs of wanting and light verbs say that something is asked for, not what: never the object
_LIGHT = {"want", "wanted", "need", "needed", "like", "love", "prefer", "would", "'d", "get", "got", "have", "put", "make",
          "keep", "go", "let", "please", "also", "just", "right", "straight", "directly", "only", "all", "everything"}
_WORD = re.compile(r"[a-z][\w'-]*")
_PLACE_TYPES = ("name", "id", "attr")  # typed values that can be part of a place; other types are values
MAX_OBJECT_WORDS = 4
REFERENT = "@referent"  # the subject of a frame whose object is "it" or "they": the object of the frame before
# "then send it to Bob", "once it's green, promote it to production": the next step of a workflow
# moves nothing back; "now put it in the freezer instead" does
_SEQUENCE = re.compile(r"\W*(?:(?:ok(?:ay)?|and|great|perfect|cool|good)\W+)*(?:then|after that|afterwards|next|finally|now|"
                       r"once\b|when\b[^,]*\b(?:done|finished|ready|green|complete|merged|approved)\b)\b")
_INSTEAD = re.compile(r"\b(?:instead|actually|rather|not)\b")
# a pronoun object or subject, with what may follow it before the preposition ("it's going", "they are being shipped")
_PRONOUN_OBJECT = re.compile(r"\b(?:it|they|them)(?:'s|'re|\s+(?:is|are|will be|should be|gets?|goes))?\b(?P<rest>[^,;]*)$")


def _content(text: str, skip_first: bool = False) -> list[str]:
    found = _WORD.findall(text)
    if skip_first and found:
        found = found[1:]
    return [lemma(w) for w in found if w not in FUNCTION_WORDS and w not in _LIGHT and len(w) > 1]


def _frame(s: Sentence, c0: int, c1: int, m: re.Match[str], values: list[tuple[int, int]]) -> Statement | None:
    clause = s.lower[c0:c1]
    left, right = clause[: m.start()], clause[m.end():]
    dets = list(_DETERMINER.finditer(left))
    indefinite = bool(dets) and dets[-1].group(0) in ("a", "an") or bool(re.search(r"\banother\b", left))
    pronoun = _PRONOUN_OBJECT.search(left)
    if pronoun and not _content(pronoun.group("rest")):
        obj = [REFERENT]  # "send it to my office": the object is named before
    elif dets:
        obj = _content(left[dets[-1].end():])
    else:  # "Store user sessions in Redis": the clause's first word is its verb
        obj = _content(left, skip_first=True)
    complement = _content(right)
    if not obj or not complement or len(obj) > MAX_OBJECT_WORDS:
        return None
    r0 = c0 + m.end() + (len(right) - len(right.lstrip()))
    if any(r0 <= a < c1 for a, _ in values):
        return None  # "on May 3", "to 150 euros": a typed value, not a place
    role = "dest" if m.group("dest") else "loc"
    end = c0 + len(clause.rstrip(" .!?;:"))
    st = stmt(s, f"frame.{role}", "value", " ".join(sorted(set(complement))), " ".join(obj[-2:]), r0, end,
              substitutable=False, subject=tuple(obj), negated=s.negated(c0 + m.start(), c1))
    if _SEQUENCE.match(s.lower) and not s.correction and not _INSTEAD.search(s.lower):
        st = replace(st, step=True)
    return replace(st, adds=True) if indefinite else st  # "book a hotel in Porto": one more, not the same one


def _sentence_frames(s: Sentence) -> list[Statement]:
    out = []
    values: list[tuple[int, int]] | None = None  # typed values, read only when a clause has a place preposition
    for c0 in sorted({0, *(b for _, b in s.boundaries)}):
        c1 = s.clause(c0)[1]
        m = _PREPOSITION.search(s.lower, c0, c1) if c1 - c0 >= 6 else None
        if m is None or not stated(s, c0, addressed=False):
            continue
        if values is None:
            values = [(t.start, t.end) for t in typed_values(s.text) if t.type.split(":", 1)[0] not in _PLACE_TYPES]
        shifted = _PREPOSITION.search(s.lower[c0:c1])
        st = _frame(s, c0, c1, shifted, values) if shifted else None
        if st is not None:
            out.append(st)
    return out


def frame_statements(text: str) -> tuple[Statement, ...]:
    """Every action frame the user states in `text` (the clash policy keeps them per text hash,
    in its bounded statement cache, with the typed statements)."""
    return tuple(st for s in split_sentences(text) for st in _sentence_frames(s))
