"""A name the KB gives in another role than the answer puts it in, and the readings that decide it:
names that end a sentence, dates glued where a dash went missing, a negation in another clause of
the evidence, a choice whose first name completes the question's predicate. Real retrieval (BM25 +
wordllama vectors) over a KB written like a document; questions and answers phrased unlike it."""

from __future__ import annotations

import numpy as np
import pytest

from ctxwarden.policies.poisoning.checkers import readings
from ctxwarden.policies.poisoning.checkers.base import CONTRADICTED, Evidence
from ctxwarden.policies.poisoning.checkers.choice import options
from ctxwarden.policies.poisoning.checkers.features import features_of
from ctxwarden.policies.poisoning.checkers.misplaced import asked_role, misplaced
from ctxwarden.policies.poisoning.checkers.roles import Role
from ctxwarden.policies.poisoning.evidence import EvidenceIndex, IndexedSentence
from ctxwarden.policies.text.slots import slots
from ctxwarden.policies.text.words import content_words, fold
from tests.poisoning_fixtures import local_judge

DOCS = {
    "dunmore": "The Dunmore Footbridge is a timber bridge over the river Ashby. It was designed by Ingrid Solberg "
               "and built by the firm of Tomas Brandt, and it opened to walkers in 1931.",
    "quarry": "Lindqvist Quarry Road is a 4.2 km gravel loop near Ashby, and it is shut to cars when no "
              "rally is held. Hikers use it all year.",
    "ward": "Ellen Ward (3 April 190411 June 1987) was a Welsh botanist who catalogued the mosses of Snowdonia.",
}


@pytest.fixture(scope="module")
def judge():
    return local_judge(DOCS)


def _names(text: str) -> list[str]:
    return [s.text for s in slots(text) if s.kind == "name"]


def test_a_name_that_ends_a_sentence_does_not_run_into_the_next_one():
    assert _names("We met at the Grand Hotel. Marta Kessler paid.") == ["Grand Hotel", "Marta Kessler"]
    # initials and abbreviations still belong to the name they open
    assert _names("The letters from J. R. Hartley reached Mr. Smith in St. Albans.") == ["J. R. Hartley", "Mr. Smith", "St. Albans"]


@pytest.mark.parametrize("text, dates", [
    ("Ellen Ward (3 April 190411 June 1987) was a botanist.", [(1904, 4, 3), (1987, 6, 11)]),
    ("Hans Olt (May 2, 1911June 30, 1980) painted ships.", [(1911, 5, 2), (1980, 6, 30)]),
    ("The hall opened on 3 April 1904 and 120 guests came.", [(1904, 4, 3)]),
])
def test_two_dates_glued_where_a_dash_went_missing_are_read_as_two(text, dates):
    assert [s.value for s in slots(text) if s.kind == "date"] == dates
    assert not [s for s in slots(text) if s.kind == "number" and s.value[0] > 10_000]  # no "190411" count


def test_the_role_a_question_asks_for():
    assert asked_role("The footbridge over the Ashby was designed by whom?") == Role("by", "design")
    assert asked_role("Who designed the Dunmore Footbridge?") == Role("by", "design")  # the agent of "designed"
    assert asked_role("What is the Dunmore Footbridge made of?") is None  # no governing word: any thing


@pytest.mark.parametrize("question, answer", [
    ("Who designed the Dunmore Footbridge?", "Tomas Brandt designed it."),
    ("The Dunmore Footbridge was designed by whom?", "Tomas Brandt"),
])
def test_a_name_from_the_passage_in_another_role_is_contradicted(judge, question, answer):
    v = judge(answer, question)
    assert v.label == CONTRADICTED and v.kind == "wrong_entity", (answer, v)


@pytest.mark.parametrize("question, answer", [
    ("Who designed the Dunmore Footbridge?", "Ingrid Solberg designed it."),
    ("The Dunmore Footbridge was designed by whom?", "Ingrid Solberg"),
    ("Who built the Dunmore Footbridge?", "It was built by Tomas Brandt's firm."),
])
def test_the_name_in_the_asked_role_passes(judge, question, answer):
    assert judge(answer, question).label != CONTRADICTED, answer


def test_a_name_listed_with_the_other_or_of_unknown_role_is_not_misplaced():
    ev = Evidence("d#0", "d", "The hall was designed by Ada Moss and Lena Holt.", "", 1.0)
    assert not misplaced("Lena Holt designed it.", "Who designed the hall?", slots("Lena Holt")[:1], [], [ev])
    ev = Evidence("d#0", "d", "Lena Holt, the owner, saw it designed by Ada Moss.", "", 1.0)
    assert not misplaced("Lena Holt designed it.", "Who designed the hall?", slots("Lena Holt")[:1], [], [ev])


def test_a_negation_in_another_clause_of_the_evidence_is_no_contradiction(judge):
    claim = judge.claim("The Lindqvist Quarry Road loop is 4.2 km of gravel.", "How long is Lindqvist Quarry Road?")
    assert not features_of(claim).negation_conflict
    claim = judge.claim("Lindqvist Quarry Road is not a gravel loop near Ashby.", "What is Lindqvist Quarry Road?")
    assert features_of(claim).negation_conflict  # the clause it restates has no negation


def test_a_glued_death_date_still_contradicts_a_wrong_year(judge):
    v = judge("Ellen Ward died in 1978.", "When did the botanist Ellen Ward die?")
    assert v.label == CONTRADICTED and v.kind == "wrong_date", v


def test_a_name_that_completes_the_predicate_is_no_option():
    assert [o.text for o in options("Which painter was Welsh, Ellen Ward or Hans Olt?")] == ["Ellen Ward", "Hans Olt"]
    assert [o.text for o in options("Which quarry is near Ashby, Lindqvist Quarry or Brandt Pit?")] == [
        "Lindqvist Quarry", "Brandt Pit"]
    assert len(options("Is Oslo, Bergen or Tromso the largest?")) == 3  # opens with its verb: all are options


def test_readings_are_kept_once_and_long_texts_are_not(monkeypatch):
    readings.forget()
    calls = []
    real = readings.slots
    monkeypatch.setattr(readings, "slots", lambda t: calls.append(t) or real(t))
    text = "The Dunmore Footbridge opened in 1931."
    assert readings.slots_of(text) is readings.slots_of(text) and len(calls) == 1
    long = "Station log " + ", ".join(f"reading {i} at {i} m" for i in range(400))
    assert len(long) > readings.CACHED_TEXT_CHARS
    readings.slots_of(long)
    readings.slots_of(long)
    assert len(calls) == 3  # read each time, never kept
    assert readings.sentences_of("One. Two.") == ("One.", "Two.")


def test_fold_and_content_words_read_accents_as_before():
    assert fold("Sørlie’s Café") == "sørlie cafe" and fold("JOHN's") == "john"
    assert content_words("The Cafés of Zürich") == {"cafe", "zurich"}
    assert [s.value for s in slots("SEVENTEEN thousand people") if s.kind == "number"] == [(17000.0, "count", 1000.0)]


def test_dense_search_ranks_as_the_matrix_product_does():
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(300, 16)).astype(np.float32)
    sentences = [IndexedSentence(f"d{i}#0", f"d{i}", 0, f"passage number {i}") for i in range(300)]
    index = EvidenceIndex(sentences, vectors)
    query = rng.normal(size=(1, 16)).astype(np.float32)
    ranked, sims = index._dense(query, 1)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    expected = np.argsort(-(unit @ (query[0] / np.linalg.norm(query[0]))))[:len(ranked[0])]
    assert ranked[0] == expected.tolist()
    assert np.allclose(sims[0], unit @ (query[0] / np.linalg.norm(query[0])), atol=1e-5)
