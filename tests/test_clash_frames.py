"""Action frames (text/statements/frames.py, clash/frames.py), revision markers, refusal verbs,
weekday-with-day dates and third-person verbs of someone else.

Phrasings here are not the bench's: they check that the mechanisms generalize."""

from __future__ import annotations

from typing import Any

import pytest

from ctxwarden.policies.base import Services
from ctxwarden.policies.clash.policy import ClashConfig, ClashPolicy
from ctxwarden.policies.text.statements.extract import extract
from ctxwarden.policies.text.statements.frames import frame_statements
from ctxwarden.policies.text.statements.model import split_sentences


class _Metrics:
    def add(self, *a: Any, **k: Any) -> None: ...
    def record(self, *a: Any, **k: Any) -> None: ...
    def gauge(self, *a: Any, **k: Any) -> None: ...


def clashes(*turns: Any):
    """User turns (strings), an assistant reply between two of them unless a {"assistant": ...} is given."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You help."}]
    for turn in turns:
        if isinstance(turn, dict):
            messages.append({"role": "assistant", "content": turn["assistant"]})
            continue
        if messages[-1]["role"] == "user":
            messages.append({"role": "assistant", "content": "Sure."})
        messages.append({"role": "user", "content": turn})
    policy = ClashPolicy(ClashConfig(evidence="any"), Services(tokens=None, metrics=_Metrics()))  # type: ignore[arg-type]
    return [c for c in policy.find_clashes(messages) if not c.duplicate]


@pytest.mark.parametrize(
    "turns",
    [
        ("Park the camper van in the driveway.", "Lunch is at noon.", "Park the camper van behind the barn."),
        ("Route the support tickets to the helpdesk queue.", "Keep the tone friendly.",
         "Send the support tickets to the Jira board."),
        ("We'd like the piano placed in the living room.", "It is heavy.", "Put the piano inside the study."),
    ],
)
def test_one_object_sent_to_two_places_clashes(turns):
    found = clashes(*turns)
    assert found and found[0].slot.startswith("frame.")


@pytest.mark.parametrize(
    "turns",
    [
        # other objects, each in its place
        ("Put the tents in the van.", "Check the weather.", "Put the food in the cooler."),
        # the same head with its own qualifier on each side: another object
        ("Pack the winter coats in the attic.", "Label the boxes.", "Pack the summer coats in the garage."),
        # one more of a kind, not the same one
        ("Reserve a table at Nopa.", "Around 8.", "Reserve a table at Zuni too."),
        ("Book the cabin in Tahoe.", "Check pets are allowed.", "Then book a cabin in Yosemite for the second week."),
        # said as an addition
        ("Copy the nightly logs to the archive server.", "Compress them.", "Also copy the nightly logs to the backup disk."),
        # one place said twice
        ("Hang the mirror in the hallway.", "Use two screws.", "Yes, the mirror goes in the hallway."),
    ],
)
def test_frames_that_are_no_clash(turns):
    assert not clashes(*turns)


def test_a_typed_value_is_no_place():
    assert not frame_statements("Move the standup to 9:30am.")
    assert not frame_statements("Push the release to March 12.")
    st = frame_statements("Store the invoices in the finance bucket.")[0]
    assert st.slot == "frame.loc" and set(st.value.split()) == {"finance", "bucket"} and "invoice" in st.subject


@pytest.mark.parametrize(
    "first,later",
    [
        ("For the deck we want cedar boards.", "Scratch the cedar, composite boards will last longer."),
        ("Keep the intro section in the deck.", "Skip the intro section in the deck."),
        ("I love crowded night markets.", "Please avoid crowded night markets."),
    ],
)
def test_revision_and_refusal_verbs(first, later):
    assert clashes(first, "Thanks.", later)


def test_change_of_plans_marks_a_replacement():
    s = split_sentences("ok so change of plans, we take the ferry")[0]
    assert s.replaces and s.changes
    assert not split_sentences("we take the ferry")[0].replaces


def test_a_weekday_with_its_day_of_month_is_one_date():
    dates = [st for st in extract("The design review is on Wednesday the 9th.") if "date" in st.slot]
    assert [st.value for st in dates] == ["d9"]
    assert clashes("The design review is on Wednesday the 9th.", "Ok.", "Move the design review to Friday the 11th.")


def test_a_relation_with_a_verb_of_their_own_speaks_of_them():
    assert not clashes("My husband drinks black tea.", "Fine.", "I don't drink black tea.")
    assert clashes("I drink black tea.", "Fine.", "I don't drink black tea anymore.")
