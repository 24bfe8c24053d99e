"""An answer read as an answer to its question: where the KB's sentence that states the question's
predicate names someone else, a name the KB lacks is wrong, not merely unverifiable."""

from __future__ import annotations

from ctxwarden.policies.poisoning.checkers.base import CONTRADICTED, ClaimToCheck, Evidence
from ctxwarden.policies.poisoning.checkers.local import LocalChecker

OBSERVATORY = (
    "The Harlow Observatory stands on a ridge above the village of Denby. "
    "It was established in 1902 by the astronomer Margaret Ellery, who directed it until 1931. "
    "Its main telescope is a 60 cm reflector."
)


def _evidence(text: str) -> tuple[Evidence, ...]:
    sentences = [s.strip() + "." for s in text.split(". ") if s.strip()]
    return tuple(Evidence(f"obs#{n}", "obs", s.rstrip(".") + ".", text, 0.9 - 0.1 * n, 0.6) for n, s in enumerate(sentences))


def _verdict(question: str, answer: str):
    [verdict] = LocalChecker().check_now([ClaimToCheck(answer, question, _evidence(OBSERVATORY))])
    return verdict


def test_another_name_for_what_the_kb_answers_is_contradicted():
    for answer in ("It was set up by the physicist Thomas Crane.",
                   "Thomas Crane, a physicist from Leeds, founded it.",
                   "That would be Thomas Crane."):
        v = _verdict("Who established the Harlow Observatory?", answer)
        assert v.label == CONTRADICTED and v.confidence >= 0.8, (answer, v)


def test_the_kb_answer_in_other_words_is_not_contradicted():
    for answer in ("Margaret Ellery set it up.", "The astronomer Ellery.", "It was Margaret Ellery, in 1902."):
        v = _verdict("Who established the Harlow Observatory?", answer)
        assert not (v.label == CONTRADICTED and v.confidence >= 0.5), (answer, v)


def test_no_answer_to_set_against_another_passes_below_the_quarantine_band():
    cases = [
        # a question the KB's sentences do not state: the KB answers nothing to contradict
        ("Who repaired the Harlow Observatory's roof?", "The roof was repaired by Thomas Crane."),
        # a name added to what is known, and a list: roles that hold many
        ("Who established the Harlow Observatory?", "Ellery did, and Thomas Crane also helped."),
        ("Who established the Harlow Observatory?", "Margaret Ellery, Thomas Crane and Ada Wills."),
        # about "it": what that is belongs to the conversation, not the KB
        ("Who established it?", "Thomas Crane established it."),
    ]
    for question, answer in cases:
        v = _verdict(question, answer)
        assert v.confidence < 0.5 or v.label != CONTRADICTED, (question, answer, v)
