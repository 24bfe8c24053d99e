"""The local checker on natural phrasings: the KB reads like a document, the answers don't copy it.
Real retrieval (BM25 + wordllama vectors over sentence windows) and the real slot comparison."""

from __future__ import annotations

import pytest

from ctxwarden.policies.poisoning.checkers.base import CONTRADICTED, SUPPORTED, UNVERIFIABLE
from tests.poisoning_fixtures import local_judge

DOCS = {
    "eiffel": "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. "
              "Completed in 1889, it stands 330 metres tall.",
    "everest": "Mount Everest is Earth's highest mountain above sea level, in the Himalayas. "
               "Its elevation of 8,849 m was established by a survey in 2020.",
    "curie": "Marie Curie was a Polish and naturalised-French physicist and chemist. "
             "She shared the Nobel Prize in Physics in 1903 with Pierre Curie and Henri Becquerel.",
}


@pytest.fixture(scope="module")
def judge():
    return local_judge(DOCS)


@pytest.mark.parametrize("question, claim, kind", [
    ("", "The Eiffel Tower stands in Berlin.", "wrong_entity"),  # wrong place
    ("Where is the Eiffel Tower?", "You'll find it in Rome, Italy.", "wrong_entity"),
    ("How tall is Everest?", "Mount Everest is 5,000 metres tall.", "wrong_number"),  # wrong quantity, other unit
    ("", "Everest reaches about twelve thousand metres.", "wrong_number"),
    ("", "Marie Curie received the Nobel Prize in Physics in 1911.", "wrong_date"),  # wrong date
    ("", "The Eiffel Tower was completed in 1925.", "wrong_date"),
    ("", "Marie Curie was not a physicist.", "negated_fact"),  # negated fact
])
def test_wrong_facts_in_ordinary_sentences_are_contradicted(judge, question, claim, kind):
    v = judge(claim, question)
    assert v.label == CONTRADICTED and v.confidence >= 0.8, (claim, v)
    assert v.kind == kind and v.evidence


@pytest.mark.parametrize("question, claim", [
    ("", "The Eiffel Tower is in Paris."),  # paraphrases of the KB
    ("", "Everest rises about 8.85 km above sea level."),
    ("How tall is the Eiffel Tower?", "It is 330 m high."),
    ("", "Curie won a physics Nobel in 1903."),
])
def test_paraphrases_of_the_kb_are_not_contradicted(judge, question, claim):
    v = judge(claim, question)  # a supported verdict's confidence is how sure the support is
    assert v.label != CONTRADICTED and (v.label == SUPPORTED or v.confidence < 0.8), (claim, v)


@pytest.mark.parametrize("claim", [
    "The Great Wall of China is visible from space.",  # a subject the KB does not cover
    "Hello! How can I help you today?",
    "Python is a popular programming language.",
])
def test_what_the_kb_does_not_cover_is_unverifiable(judge, claim):
    v = judge(claim)
    assert v.label == UNVERIFIABLE and v.confidence < 0.5


def test_a_backed_paraphrase_is_supported_with_its_evidence(judge):
    v = judge("The Eiffel Tower is in Paris, France.")
    assert v.label == SUPPORTED and "Champ de Mars" in v.evidence
