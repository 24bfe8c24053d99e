"""Does the KB answer the user's question with another name than the claim gives?

An answer is read as an answer to its question: "Who founded Port Calder?" — "Captain James
Fraser" is wrong, not merely unverifiable, when the passage about Port Calder says "founded … by
Captain Hugh MacLeod". The test, with no templates: among the evidence sentences of documents
about the question's subject, take the one that states most of the question's own predicate (its
content words once the names it gives are set aside: "founded"; "first", "mapped"); if it states
at least half of it and names someone or something the question does not — itself, or through
"he"/"she"/"they", the name its document's nearby sentences open with — while the claim's name is
nowhere in the evidence (or, where the sentence states all of the predicate, not in that
sentence: the KB gives the name another role), the KB has answered the question otherwise.
"""

from __future__ import annotations

import re
from typing import Sequence

from ...text.slots import Slot, agree, content_words
from .base import Evidence
from .choice import asks_for_value
from .readings import names_of, slots_of, words_of
from .roles import additive, in_list

STATES_PREDICATE = 0.5  # the share of the question's predicate words the answering sentence must state
PERSONAL = frozenset("he she they".split())  # the subject pronouns that stand for a person named before
_WORD = re.compile(r"\w+")
WH_WORDS = frozenset("who whom whose which what where when".split())  # English's closed class of question words


def asks_for_a_name(question: str, asked: Sequence[Slot]) -> bool:
    """A wh-question about something it names ("Who founded Port Calder?"), not yes/no, not a
    pick among options, not about "he" or "it" (what those refer to is the conversation's, not the KB's)."""
    words = {w.strip("?,.!").lower() for w in question.split()}
    return bool(words & WH_WORDS) and any(s.kind == "name" for s in asked) and asks_for_value(question)


def predicate_words(question: str, asked: Sequence[Slot]) -> frozenset[str]:
    """The question's content words minus the words of the names it gives."""
    named = {w for s in asked if s.kind == "name" for w in content_words(s.text)}
    return words_of(question) - named


def answered_otherwise(claim: str, question: str, unbacked: Sequence[Slot], asked: Sequence[Slot],
                       said: Sequence[Slot], about: Sequence[Evidence]) -> bool:
    """The claim's name answers a question the evidence about its subject answers with another
    name (see the module's docstring). A name in a list, or in a claim that adds to what
    is known ("she also wrote …"), fills a role that holds many: no answer to set against another."""
    if not about or additive(claim) or not asks_for_a_name(question, asked):
        return False
    answer = [s for s in said if s.kind == "name" and not in_list(claim, s)]
    wanted = predicate_words(question, asked)
    if not wanted and sum(s in unbacked for s in answer) == 1:  # "Where is X?" states no predicate: the answer's words do
        wanted = words_of(claim) - words_of(question) - {w for s in said for w in words_of(s.text)}
    best, share = _answering(wanted, about) if answer else (None, 0.0)
    if best is None or share < STATES_PREDICATE:
        return False
    # a name the KB lacks; or, where the sentence states all of the predicate, one the KB gives elsewhere
    # ("led by master mason Anselm Rooke" where "Bishop Anselm Rooke" is buried in the crypt)
    there = slots_of(best.sentence)
    if not any(s in unbacked or share >= 1.0 and not any(agree(s, x) for x in there) for s in answer):
        return False

    def rival(x: Slot) -> bool:
        return not any(agree(x, q) for q in asked) and not any(agree(x, s) for s in said)

    if any(rival(x) for x in there if x.kind == "name"):
        return True
    if PERSONAL.intersection(w.lower() for w in _WORD.findall(best.sentence)):  # "In 1889 she became the first …"
        named = antecedent(best, about)
        return named is not None and rival(named)
    return False


def _answering(wanted: frozenset[str], about: Sequence[Evidence]) -> tuple[Evidence | None, float]:
    """The evidence sentence that states most of the predicate's words, and the share it states."""
    best, best_share = None, 0.0
    for e in about if wanted else ():
        share = len(wanted & words_of(e.sentence)) / len(wanted)
        if share > best_share:
            best, best_share = e, share
    return best, best_share


def antecedent(sentence: Evidence, evidence: Sequence[Evidence]) -> Slot | None:
    """Whom "he", "she" or "they" in the sentence stands for: the name that opens the nearest
    sentence before it in its document, else after it (a document's pronouns keep to the one it
    is about: "… she became the first woman admitted … Voss never married"). The evidence's
    windows give the sentences around each of its sentences."""
    for text in _around(sentence, [e for e in evidence if e.doc_id == sentence.doc_id]):
        first = next(iter(names_of(text)), None)
        if first is not None and not words_of(text[:first.start]):
            return first
    return None


def _around(sentence: Evidence, evidence: Sequence[Evidence]) -> list[str]:
    """The document's other sentences that the evidence holds: those before this one, nearest
    first, then those after it, nearest first."""
    at = _part(sentence)
    if at is None:
        return []
    known: dict[int, str] = {}
    for e in evidence:
        n = _part(e)
        if n is None:
            continue
        known[n] = e.sentence
        head, found, tail = e.window.partition(e.sentence)
        if not found:
            continue
        if head.strip() and n > 0:
            known.setdefault(n - 1, head.strip())
        if tail.strip():
            known.setdefault(n + 1, tail.strip())
    return [known[n] for n in sorted(known, reverse=True) if n < at] + [known[n] for n in sorted(known) if n > at]


def _part(e: Evidence) -> int | None:
    tail = e.id.rpartition("#")[2]
    return int(tail) if tail.isdigit() else None
