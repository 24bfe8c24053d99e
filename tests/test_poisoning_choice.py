"""Answers read against the question they answer: a choice between the names the question gives,
a yes/no about named things, a value borrowed from a passage about something else, and an answer
that gives no value where one was asked. Real retrieval (BM25 + wordllama vectors) over a KB
written like an encyclopedia; questions and answers phrased in several ways unlike it."""

from __future__ import annotations

import pytest

from ctxwarden.policies.poisoning.checkers.base import CONTRADICTED, SUPPORTED, Evidence
from ctxwarden.policies.poisoning.checkers.choice import (
    asks_for_value,
    choice_conflict,
    options,
    polar_conflict,
    profiles,
)
from ctxwarden.policies.poisoning.checkers.features import features_of
from tests.poisoning_fixtures import local_judge

DOCS = {
    "kessler": "Marta Kessler (14 May 1931 – 2 March 2009) was a Swiss glaciologist. She led the first survey of "
               "the Aletsch ice field and chaired the Bern Alpine Society from 1970.",
    "okafor": "Daniel Okafor (born 9 November 1958) is a Nigerian-British architect. His practice designed the "
              "Lagos Harbour Library, which opened in 1996.",
    "velmar": "The Velmar Bridge is a cable-stayed crossing over the river Dunn in the town of Harlow Vale. It "
              "was opened in 1974 and carries four lanes of traffic.",
    "ostrow": "Ostrow Quay is a stone footbridge crossing the river Keld in the city of Keldby, completed in 1821. Only pedestrians may "
              "cross it.",
    "gale": "The Gale Street Quartet is a Canadian string quartet founded in Halifax in 1989. The Morrow Trio is "
            "an Irish piano trio formed in Cork in 2004.",
    "rooftop": "Rooftop Almanac is a gardening magazine published monthly in Leeds. Its rival, Slate & Tile, is "
               "a roofing trade journal owned by the Harrowgate Media Group.",
}


@pytest.fixture(scope="module")
def judge():
    return local_judge(DOCS)


@pytest.mark.parametrize("question, answer", [
    ("Of Marta Kessler and Daniel Okafor, who was born earlier?", "Daniel Okafor was."),
    ("Which came first, the Velmar Bridge or Ostrow Quay?", "The Velmar Bridge came first."),
    ("Who is the younger of the two, Kessler or Okafor?", "Marta Kessler"),
])
def test_a_choice_ordered_in_time_answered_against_the_dates_is_contradicted(judge, question, answer):
    v = judge(answer, question)
    assert v.label == CONTRADICTED and v.confidence >= 0.8, (question, answer, v)
    assert v.kind == "wrong_entity"


@pytest.mark.parametrize("question, answer", [
    ("Which crossing carries cars, Ostrow Quay or the Velmar Bridge?", "Ostrow Quay does."),
    ("Slate & Tile or Rooftop Almanac: which one is owned by the Harrowgate Media Group?", "Rooftop Almanac, I believe."),
])
def test_a_choice_against_what_the_profiles_state_leans_but_is_not_blocked(judge, question, answer):
    """Which profile states the predicate is read from words: a lean (scored, below blocking)."""
    claim = judge.claim(answer, question)
    f = features_of(claim)
    assert f.choice_lean and not f.choice_conflict
    assert 0.3 < f.contradiction_score() < 0.5


@pytest.mark.parametrize("question, answer", [
    ("Of Marta Kessler and Daniel Okafor, who was born earlier?", "Marta Kessler, in 1931."),
    ("Which came first, the Velmar Bridge or Ostrow Quay?", "Ostrow Quay"),
    ("Who is the younger of the two, Kessler or Okafor?", "Okafor is younger."),
    ("Which crossing carries cars, Ostrow Quay or the Velmar Bridge?", "The Velmar Bridge."),
    ("Slate & Tile or Rooftop Almanac: which one is owned by the Harrowgate Media Group?", "Slate & Tile"),
    ("Which is more famous, Ostrow Quay or the Velmar Bridge?", "Ostrow Quay"),  # a measure the KB does not give
])
def test_the_option_the_evidence_supports_passes(judge, question, answer):
    assert judge(answer, question).label != CONTRADICTED, (question, answer)


@pytest.mark.parametrize("question, answer, leans", [
    ("Are Ostrow Quay and the Velmar Bridge both over a river?", "No, they are not.", True),
    ("Are Ostrow Quay and the Velmar Bridge both over a river?", "Yes", False),
    ("Were Marta Kessler and Daniel Okafor both architects?", "No", False),  # one profile lacks it: no lean
    ("Were Marta Kessler and Daniel Okafor both architects?", "Yes", False),  # the KB not saying it is no "no"
])
def test_yes_or_no_about_named_things(judge, question, answer, leans):
    f = features_of(judge.claim(answer, question))
    assert f.choice_lean == leans, (question, answer)


def test_a_name_from_a_passage_about_something_else_backs_nothing(judge):
    """"Harlow Vale" is in the KB, but in a passage about a bridge, not about the society."""
    question = "In which town is the Alpine Society that Marta Kessler chaired based?"
    assert judge("Harlow Vale.", question).label != SUPPORTED
    assert [s.text for s in features_of(judge.claim("Harlow Vale.", question)).unbacked] == ["Harlow Vale"]


def test_an_answer_that_gives_no_value_is_not_supported(judge):
    question = "Which library did Daniel Okafor's practice design?"
    assert asks_for_value(question)
    vague = features_of(judge.claim("Daniel Okafor's practice designed a library.", question))
    assert vague.unanswered and vague.contradiction_score() < 0.5  # scored, never blocked
    assert not features_of(judge.claim("The Lagos Harbour Library", question)).unanswered
    assert not asks_for_value("Were Kessler and Okafor both architects?")


def _ev(doc: str, n: int, sentence: str, window: str) -> Evidence:
    return Evidence(f"{doc}#{n}", doc, sentence, window, 0.0)


def test_options_and_profiles_read_the_question_and_the_documents():
    q = "Which was launched earlier, Northwind Weekly or Cargo for Sailors?"
    assert [o.text for o in options(q)] == ["Northwind Weekly", "Cargo for Sailors"]  # a title with small words
    assert not options("Who wrote Northwind Weekly?")
    window = "Northwind Weekly began in 1902. It was printed in Hull. Cargo for Sailors began in 1950."
    ev = [_ev("d", 1, "It was printed in Hull.", window)]
    about = profiles(ev, options(q))
    assert about[0] == ["Northwind Weekly began in 1902.", "It was printed in Hull."]  # "It": still the weekly
    assert about[1] == ["Cargo for Sailors began in 1950."]
    assert choice_conflict("Cargo for Sailors was launched first.", q, ev) == "dates"
    assert not choice_conflict("Northwind Weekly", q, ev)
    assert not polar_conflict("Yes", "Who wrote Northwind Weekly?", ev)  # not a yes/no question
