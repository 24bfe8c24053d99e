"""A name the evidence does give, but in another role than the one the answer puts it in.

"Who directed Beowulf?" — "Neil Gaiman directed it." The passage names Neil Gaiman ("written by
Neil Gaiman"), so every name of the answer is backed, and the predicate word ("directed") is the
question's own, so no rival predicate shows; yet the passage gives the role the answer fills to
another ("directed by Robert Zemeckis"). The role the answer fills is read from the answer ("X was
directed by N", "N directed X": the agent of "directed", i.e. "directed by N") or, for a bare
name, from the question ("directed by whom?", "Who directed X?"). Only the closed classes of
English are used: wh-words, prepositions (roles.py), and the regular past tense of the verb whose
subject the wh-word is.
"""

from __future__ import annotations

import re
from typing import Sequence

from ...text.slots import Slot, agree, fold, stem
from .base import Evidence
from .readings import names_of
from .roles import Role, _content, _words_after, role, same_role

_WH = re.compile(r"\b(?:who|whom|what|which)\b", re.I)
_PAST = re.compile(r"[a-z]{3,}ed")


def asked_role(question: str) -> Role | None:
    """The role the question asks its answer to fill: that of its wh-word ("directed by whom?":
    by + direct), or, when the wh-word is the subject of a verb ("Who directed X?"), the agent of
    that verb ("directed by ..."). None when the question does not say (a governing word is needed:
    "in what" alone is any place, time or thing)."""
    for m in _WH.finditer(question):
        asked = role(question, Slot("name", m.group(0), m.start(), m.end()))
        if asked is not None and asked.link and asked.head:
            return asked
        if m.start() == len(question) - len(question.lstrip()):  # the question opens with it
            after = _words_after(question, m.end(), 1)
            if after and _content(after[0]) and _PAST.fullmatch(after[0]):
                return Role("by", stem(fold(after[0])))
    return None


def answer_role(claim: str, name: Slot, asked: Role | None) -> Role | None:
    """The role the answer puts `name` in: read from the answer's own words ("directed by N";
    "N directed ...": the agent, "directed by N"), else the role the question asks for."""
    own = role(claim, name)
    if own is not None and own.link and own.head:
        return own
    after = _words_after(claim, name.end, 1)
    if not claim[:name.start].strip() and after and _content(after[0]) and _PAST.fullmatch(after[0]):
        return Role("by", stem(fold(after[0])))
    return asked if own is None else None


def misplaced(claim: str, question: str, names: Sequence[Slot], asked_names: Sequence[Slot],
              about: Sequence[Evidence]) -> bool:
    """Some name of the answer is put in a role that an evidence sentence about the subject gives
    to another name (one neither the question nor the answer gives), while the evidence about the
    subject names the answer's name, and only in other roles it reads clearly."""
    wanted = asked_role(question)
    sentences = list(dict.fromkeys(e.sentence for e in about))
    for name in names:
        mine = answer_role(claim, name, wanted)
        if mine is None:
            continue
        # its roles there: none unknown (it opens a sentence, follows a noun: "the artist N", is a
        # later member of a list: "by A and B") nor the same
        held = [role(s, e) for s in sentences for e in names_of(s) if agree(name, e)]
        if not held or any(not _known(r) or same_role(mine, r) for r in held):
            continue
        for sentence in sentences:
            others = [e for e in names_of(sentence) if not any(agree(e, q) for q in (*asked_names, *names))]
            if any(_known(r := role(sentence, e)) and r == mine for e in others):
                return True
    return False


def _known(r: Role | None) -> bool:
    """A role both linked and governed ("directed by", "born in"): the name's place in the sentence is clear."""
    return r is not None and bool(r.link) and bool(r.head)
