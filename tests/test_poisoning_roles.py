"""Where the local checker must not cry wolf, and where it still must bite: names in the same role
for the same subject, values given as one of many, negations that scope elsewhere, numbers at the
precision they are given, misspelt names and KB text glued without spaces. Real retrieval (BM25 +
wordllama vectors) over a KB written like a document; answers phrased unlike it."""

from __future__ import annotations

import pytest

from ctxwarden.policies.poisoning.checkers.base import CONTRADICTED
from ctxwarden.policies.poisoning.checkers.roles import clauses, negated_statement
from ctxwarden.policies.text.slots import agree, slots
from tests.poisoning_fixtures import local_judge

DOCS = {
    "austen": "Pride and Prejudice is a novel published in 1813. Its author, Jane Austen, wrote it at Steventon.",
    "titanic": "Titanic is a 1997 romantic disaster film. It was directed by James Cameron.",
    "castaway": "Cast Away is a survival drama from 2000 in which Tom Hanks plays a FedEx employee stranded on an island.",
    "everest": "Mount Everest is Earth's highest mountain above sea level. Its elevation of 8,849 m was set in 2020.",
    "coens": "No Country for Old Men is a 2007 crime thriller. It was directed by Joel and Ethan Coen.",
}


@pytest.fixture(scope="module")
def judge():
    return local_judge(DOCS)


@pytest.mark.parametrize("question, claim, kind", [
    ("Where was Pride and Prejudice written?", "Austen wrote Pride and Prejudice at Chawton.", "wrong_entity"),  # same role, same subject
    ("Who made Titanic?", "Titanic was directed by Steven Spielberg.", "wrong_entity"),
    ("", "Everest's summit sits 8,860 metres above the sea.", "wrong_number"),  # close, but not at its precision
])
def test_another_value_in_the_same_slot_is_still_contradicted(judge, question, claim, kind):
    v = judge(claim, question)
    assert v.label == CONTRADICTED and v.confidence >= 0.8, (claim, v)
    assert v.kind == kind


@pytest.mark.parametrize("question, claim", [
    ("Anything else by the author of Pride and Prejudice?", "Jane Austen also wrote Persuasion, which you may enjoy."),  # adds a value
    ("Who was in Titanic?", "Titanic starred Kate Winslet and Leonardo DiCaprio."),  # another role than "directed by"
    ("Do you know Cast Away?", "Tom Hanks is in Cast Away, but I haven't seen it myself."),  # the negation is the speaker's
    ("Is No Country for Old Men any good?", "Yes, No Country for Old Men was made by the Coen brothers."),  # "No" in a title
    ("", "Everest's summit sits 8,850 metres above the sea."),  # 8,849 m at the precision given
    ("Who directed Titanic?", "It was directed by James Camerom."),  # a misspelt name is the same person
])
def test_names_and_values_the_kb_does_not_rule_out_are_not_blocked(judge, question, claim):
    v = judge(claim, question)
    assert v.confidence < 0.8 or v.label != CONTRADICTED, (claim, v)


def test_a_negation_counts_in_the_clause_that_restates_the_evidence():
    assert clauses("Tom Hanks starred in Cast Away, but I haven't seen it.") == ["Tom Hanks starred in Cast Away", "I haven't seen it."]
    assert clauses("No, only Wenling is in China.") == ["No, only Wenling is in China."]  # the answer particle stays
    assert clauses("Wenling is in China, but Xinzheng is not.") == ["Wenling is in China, Xinzheng is not."]  # ellipsis
    assert not negated_statement("No Country for Old Men won four Oscars.", [])
    assert negated_statement("The film did not win an Oscar.", [])


def test_numbers_agree_at_the_precision_they_are_given():
    def number(text: str):
        return next(s for s in slots(text) if s.kind == "number")

    assert agree(number("8,849 m"), number("8.85 km")) and agree(number("8,849 m"), number("29,032 feet"))
    assert not agree(number("276 years"), number("275 years"))
    assert not agree(number("a population of 728,000"), number("a population of 722,664"))


def test_glued_kb_text_and_misspelt_names():
    names = [s.text for s in slots("Ophelia LovibondNo Strings Attached is directed by Ivan Reitman")]
    assert "Ophelia Lovibond" in names and not any("LovibondNo" in n for n in names)
    thorne, throne = (next(s for s in slots(t) if s.kind == "name") for t in ("by Jack Thorne", "by Jack Throne"))
    assert agree(thorne, throne)
    paris, berlin = (next(s for s in slots(t) if s.kind == "name") for t in ("in Paris", "in Berlin"))
    assert not agree(paris, berlin)


def test_a_long_claim_full_of_values_is_read_once_not_once_per_value(judge, monkeypatch):
    """A tool result with no sentence ends is one claim of hundreds of numbers: its slots must be
    parsed a bounded number of times, not once per value per evidence passage (the demo hung on it)."""
    from ctxwarden.policies.poisoning.checkers import readings

    calls = {"n": 0}
    real = readings.slots

    def counting(text):
        calls["n"] += len(text) > readings.CACHED_TEXT_CHARS
        return real(text)

    monkeypatch.setattr(readings, "slots", counting)
    blob = "Mount Everest readings " + ", ".join(f"station {i} at {8000 + i} m on 12 May {1900 + i % 100}" for i in range(300))
    judge(blob, "How tall is Mount Everest?")
    assert calls["n"] <= 4
