"""Clashes between action frames (text/statements/frames.py): one object sent, or kept, in two
places. "Save the cleaned dataset to the raw bucket" … "Write the cleaned data to the shared
drive": the same object (the phrases share a word, or an embedder finds them close), the same
role (where it goes / where it is), complements that share nothing, in two messages, the later
one not an addition ("also ... to Y") nor a new run of a step. An object with its own qualifier
on each side ("user sessions" / "audit logs") is another object: a scope, no clash.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Callable

from ..text.statements.frames import REFERENT
from ..text.statements.match import Matcher, two_of_a_series
from ..text.statements.model import Statement
from ..text.statements.subject import different_scope

_NAME = re.compile(r"\b[A-Z][\w'-]*")  # the complement is read from its preposition on: its first word starts no sentence
COMPLEMENT_SIMILARITY = 0.8  # cosine above which two complements name one place ("garage" / "the garage bay")


def frames_clash(a: Statement, b: Statement, matcher: Matcher) -> bool:
    """Whether frame `b` (said after `a`, in another message) moves `a`'s object elsewhere."""
    if a.slot != b.slot or a.negated or b.negated or b.step or b.adds:
        return False
    if ("@other" in a.subject) != ("@other" in b.subject):
        return False
    if two_of_a_series(a, b) or not matcher.same_subject(a, b) or different_scope(a.subject, b.subject) is not None:
        return False
    ca, cb = set(a.value.split()), set(b.value.split())
    if ca & cb and not _named_apart(a.display, b.display):
        return False
    cosine = matcher.phrase_cosine(a.value, b.value)
    return cosine is None or cosine < COMPLEMENT_SIMILARITY


def _named_apart(a: str, b: str) -> bool:
    """Two places of one kind, each with a name of its own: "the Frankfurt bucket" / "the Dublin bucket"."""
    na, nb = set(_NAME.findall(a)), set(_NAME.findall(b))
    return bool(na - nb) and bool(nb - na)


def frame_pairs(frames: list, matcher: Matcher, skip: Callable[[object, object], bool]) -> list[tuple[object, object]]:
    """(older, newer) located frames that clash; `frames` is in conversation order, each with
    `.message` and `.st`; `skip(older, newer)` drops pairs already reported otherwise."""
    frames = resolved(frames)
    out = []
    for j, newer in enumerate(frames):
        for older in reversed(frames[:j]):
            if older.message != newer.message and frames_clash(older.st, newer.st, matcher) and not skip(older, newer):
                out.append((older, newer))
                break
    return out


def resolved(frames: list) -> list:
    """Frames whose object is a pronoun ("send it to my office") take the object of the nearest
    frame said before them with a definite object ("ship the order to my home address", not "write
    a note to the courier"); with none before, they are dropped."""
    out: list = []
    for loc in frames:
        if REFERENT in loc.st.subject:
            named = next((f for f in reversed(out) if REFERENT not in f.st.subject and not f.st.adds), None)
            if named is None:
                continue
            loc = replace(loc, st=replace(loc.st, subject=named.st.subject))
        out.append(loc)
    return out
