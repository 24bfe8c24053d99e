"""What backs an answer's slot: the evidence must give it at the precision the answer does, from
the documents about the question (and those about a name they give: the second hop, not any
passage that shares a country with them); and the cap below blocking keeps the model's order."""

from __future__ import annotations

from ctxwarden.policies.poisoning.checkers.base import ClaimToCheck, Evidence
from ctxwarden.policies.poisoning.checkers.features import UNBACKED_CAP, WORDING_CAP, _cap, features_of


def _ev(doc: str, n: int, text: str, score: float = 0.5) -> Evidence:
    return Evidence(f"{doc}#{n}", doc, text, text, score, 0.6)


def _unbacked(question: str, answer: str, *evidence: Evidence) -> list[str]:
    return [s.text for s in features_of(ClaimToCheck(answer, question, tuple(evidence))).unbacked]


ORWELL = _ev("novel", 0, "The Quiet Harbour is a 1952 novel by Edwin Marsh. Marsh was a Canadian author.")


def test_a_more_specific_name_than_the_evidence_gives_is_not_backed():
    q = "What nationality was the author of The Quiet Harbour?"
    assert _unbacked(q, "Canadian", ORWELL) == []
    assert _unbacked(q, "French-Canadian", ORWELL) == ["French-Canadian"]


def test_a_shorter_name_is_still_backed():
    q = "Who wrote The Quiet Harbour?"
    assert _unbacked(q, "Marsh", ORWELL) == []
    assert _unbacked(q, "Edwin Marsh", ORWELL) == []


OPENED = _ev("hall", 0, "The Brook Hall in Tallis was officially opened in 1968 by Oliver Grant, the mayor of the United Kingdom town.")
GRANT = _ev("grant", 0, "Oliver Grant (1901 - 1980) was a British Liberal politician and mayor of Tallis.")
OTHER = _ev("commission", 0, "The Fenwick Commission reported to the United Kingdom cabinet. Its chairman was a British Labour politician.")


def test_the_second_hop_is_a_passage_about_a_name_the_first_gives():
    q = "In what political party was the man who officially opened the Brook Hall in 1968?"
    assert _unbacked(q, "Liberal", OPENED, GRANT, OTHER) == []
    # "Labour" is only in a passage that shares "United Kingdom" with it, about something else
    assert _unbacked(q, "Labour", OPENED, GRANT, OTHER) == ["Labour"]


def test_the_cap_keeps_the_order_of_what_it_caps_and_stays_below_it():
    for cap in (WORDING_CAP, UNBACKED_CAP):
        capped = [_cap(p, cap) for p in (0.1, 0.3, 0.4, 0.6, 0.9, 1.0)]
        assert capped[:2] == [0.1, 0.3]  # below the band: unchanged
        assert capped == sorted(set(capped)) and capped[-1] <= cap < 0.5
