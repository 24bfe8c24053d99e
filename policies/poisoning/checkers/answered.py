"""Does the KB answer the user's question with another name than the claim gives?

An answer is read as an answer to its question: "Who founded Port Calder?" — "Captain James
Fraser" is wrong, not merely unverifiable, when the passage about Port Calder says "founded … by
Captain Hugh MacLeod". The test, with no templates: among the evidence sentences about the
question's subject, take the one that states most of the question's own predicate (its content
words once the names it gives are set aside: "founded"; "first", "mapped"); if it states at least
half of it and names someone or something the question does not, while the claim's name is
nowhere in the evidence, the KB has answered the question otherwise.
"""

from __future__ import annotations

from typing import Sequence

from ...text.slots import Slot, agree, content_words
from .base import Evidence
from .choice import asks_for_value
from .readings import slots_of, words_of
from .roles import additive, in_list

STATES_PREDICATE = 0.5  # the share of the question's predicate words the answering sentence must state
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
    """The claim's unbacked name answers a question the evidence about its subject answers with
    another name (see the module's docstring). A name in a list, or in a claim that adds to what
    is known ("she also wrote …"), fills a role that holds many: no answer to set against another."""
    mine = [s for s in unbacked if s.kind == "name" and not in_list(claim, s)]
    if not mine or not about or additive(claim) or not asks_for_a_name(question, asked):
        return False
    wanted = predicate_words(question, asked)
    if not wanted:
        return False
    best, best_share = None, 0.0
    for e in about:
        share = len(wanted & words_of(e.sentence)) / len(wanted)
        if share > best_share:
            best, best_share = e, share
    if best is None or best_share < STATES_PREDICATE:
        return False
    rivals = [x for x in slots_of(best.sentence) if x.kind == "name"
              and not any(agree(x, q) for q in asked) and not any(agree(x, s) for s in said)]
    return bool(rivals)
