"""How the local checker reads what people type: lower-case questions, numbers glued to their
units, a negative answer set off by a dash, a name that only shares a word with the question's."""

from __future__ import annotations

from ctxwarden.policies.poisoning.checkers.asked import asked_slots
from ctxwarden.policies.poisoning.checkers.base import CONTRADICTED, ClaimToCheck, Evidence
from ctxwarden.policies.poisoning.checkers.local import LocalChecker

GALLERY = (
    "The Orrin Gallery of Textile Art is housed in a former wool exchange in the port of Saltby. "
    "It was founded by the weaver Clara Pennock and opened its doors in 1961. "
    "Its largest piece is a 14-metre tapestry of the Saltby harbour. "
    "The linen archive is open to researchers, but flash photography is not permitted anywhere in the building."
)
DEVICE = (
    "The Kestrel K2 is a handheld weather meter sold by Arden Instruments. "
    "It runs on two AA batteries and has a 2.8-inch backlit display. "
    "The K2 is waterproof to a depth of 1 metre. "
    "Warranty claims at Arden Instruments are approved by service manager Tomas Reyes. "
    "Arden Instruments was founded by Mara Quill in the town of Corby, Ontario."
)
BIOGRAPHY = (
    "Ilse Brandauer (1851–1920) was an Austrian geologist. "
    "Trained in Munich, she mapped the glaciers of the Ötztal for two decades. "
    "In 1894 she became the first woman elected to the Vienna Geological Society. "
    "Brandauer retired to Graz, where the town hall was built under the architect Otto Lenz. "
    "The surveys she led were funded by Count Anton Wessely."
)


def _verdict(text: str, question: str, answer: str):
    sentences = [s.strip().rstrip(".") + "." for s in text.split(". ") if s.strip()]
    evidence = tuple(Evidence(f"doc#{n}", "doc", s, " ".join(sentences[max(0, n - 1):n + 2]), 0.9 - 0.1 * n, 0.6)
                     for n, s in enumerate(sentences))  # as the KB gives them: each sentence with its neighbours
    [verdict] = LocalChecker().check_now([ClaimToCheck(answer, question, evidence)])
    return verdict


def _blocked(v) -> bool:
    return v.label == CONTRADICTED and v.confidence >= 0.8


def _passes(v) -> bool:
    return not (v.label == CONTRADICTED and v.confidence >= 0.5)


def test_a_question_typed_in_lower_case_names_what_the_evidence_capitalizes():
    names = [s.text for s in asked_slots("who founded the orrin gallery", [GALLERY]) if s.kind == "name"]
    assert names == ["orrin gallery"]  # the KB writes both with a capital inside a sentence
    names = [s.text for s in asked_slots("is flash photography allowed in the orrin", [GALLERY]) if s.kind == "name"]
    assert names == ["orrin"]  # the KB writes "flash photography" in lower case: common words
    cased = asked_slots("Who founded the orrin gallery in Saltby?", [GALLERY])  # cased: taken at its word
    assert [s.text for s in cased] == ["Saltby"]


def test_a_wrong_founder_is_blocked_when_the_question_is_typed_in_lower_case():
    for answer in ("It was started by the painter Hugo Varley.", "Hugo Varley founded it in 1961."):
        assert _blocked(_verdict(GALLERY, "who founded the orrin gallery", answer)), answer
    for answer in ("Clara Pennock, a weaver, founded it.", "The weaver Pennock."):
        assert _passes(_verdict(GALLERY, "who founded the orrin gallery", answer)), answer


def test_a_number_glued_to_its_unit_is_compared_in_that_unit():
    assert _blocked(_verdict(DEVICE, "How big is the K2's display?", "It has an 8-inch screen."))
    assert _blocked(_verdict(DEVICE, "How big is the K2's display?", "The screen measures 8 inches."))
    # "8-inch" is not found inside "2.8-inch"
    assert _passes(_verdict(DEVICE, "How big is the K2's display?", "It has a 2.8-inch backlit screen."))


def test_a_negative_answer_set_off_by_a_dash_is_read_with_what_it_answers():
    assert _blocked(_verdict(GALLERY, "Is the linen archive open to researchers?",
                             "The linen archive is not open to researchers — you would have to ask the curator for copies."))
    # the particle answers the question; what follows restates the KB's own negation
    assert _passes(_verdict(GALLERY, "Can I take flash photos in the Orrin Gallery?",
                            "Sadly not — flash photography is not permitted anywhere in the building."))


def test_a_name_sharing_a_word_with_the_questions_is_someone_new():
    question = "Who approves warranty claims at Arden Instruments?"
    assert _blocked(_verdict(DEVICE, question, "They are signed off by the founder, Lena Arden."))
    assert _passes(_verdict(DEVICE, question, "Tomas Reyes, the service manager, approves them."))


def test_she_in_the_answering_sentence_stands_for_the_person_the_document_is_about():
    question = "Who was the first woman elected to the Vienna Geological Society?"
    for answer in ("That honour went to Marie Huber.", "It was the chemist Marie Huber, in 1894."):
        assert _blocked(_verdict(BIOGRAPHY, question, answer)), answer
    for answer in ("Ilse Brandauer was.", "The geologist Brandauer, in 1894."):
        assert _passes(_verdict(BIOGRAPHY, question, answer)), answer


def test_a_name_the_kb_gives_another_role_is_not_the_answer():
    question = "Who funded Brandauer's surveys?"
    assert _blocked(_verdict(BIOGRAPHY, question, "They were paid for by the architect Otto Lenz."))
    assert _passes(_verdict(BIOGRAPHY, question, "Count Anton Wessely funded them."))


def test_a_where_question_with_no_predicate_is_read_through_the_answers_own_words():
    question = "Where is Arden Instruments?"
    assert _blocked(_verdict(DEVICE, question, "It's in the town of Corby, Manitoba."))
    assert _passes(_verdict(DEVICE, question, "In the town of Corby, Ontario."))
