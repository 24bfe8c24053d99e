"""Clashes said through meaning rather than through one shared value: a name given as the value of
a role ("my boss is Rhea" … "Bashir, my boss").

Phrasings here are not the bench's: they check that the mechanisms generalize."""

from __future__ import annotations

import pytest

from ctxwarden.policies.cache import stable_hash
from ctxwarden.policies.clash.detect import Located, local_clashes
from ctxwarden.policies.text.statements.extract import extract


def contradictions(*turns: str):
    """Turns are user messages at indices 0, 2, 4, ... (assistant replies in between)."""
    found = []
    for i, text in enumerate(turns):
        found += [Located(2 * i, -1, f"{stable_hash(text)}#{i}", st) for st in extract(text)]
    return [c for c in local_clashes(found) if not c.duplicate]


# ----------------------------------------------------------------------------- a name as a role's value


@pytest.mark.parametrize(
    "turns",
    [
        ("My boss is Rhea, she files everything in March.", "Please forward the receipts to Bashir, my boss."),
        ("Our neighbor is Okafor, he lives upstairs.", "Write the parking note to Lindqvist, our neighbor."),
        ("For refunds, the approver will be the controller, Ingrid Solberg.", "Route the refund form to Teodor Vance, our controller."),
    ],
)
def test_a_name_given_as_a_roles_value_clashes_with_another_name_for_that_role(turns):
    assert contradictions(*turns), turns


@pytest.mark.parametrize(
    "turns",
    [
        ("My boss is Rhea, she files everything in March.", "Please forward the receipts to Bashir, my lawyer."),
        ("My boss is Rhea.", "Her name is Rhea Castellanos, by the way."),
        ("For refunds, the approver will be the controller, Ingrid Solberg.", "Route the refund form to Teodor Vance, our auditor."),
        ("My sister's dentist is Dr. Okafor.", "Book me in with Dr. Lindqvist, my dentist."),
    ],
)
def test_names_of_other_roles_or_other_peoples_roles_do_not_clash(turns):
    assert not contradictions(*turns), turns
