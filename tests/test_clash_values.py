"""The clash detector on values said the way people say them: units from the shared table, a
measurement whose subject is in the rest of its sentence, a year on its own, a person named beside
their role, an amount said without its currency, fractions of a unit, numbered labels."""

from __future__ import annotations

import pytest

from tests.clash_fixtures import contradictions


@pytest.mark.parametrize("older, newer, old_value, new_value", [
    # a unit the clash detector did not read before the table was shared
    ("The rain barrel holds 2 gallons.", "The rain barrel holds 12 litres.", "7.57082", "12"),
    # the later value's subject ("shed floor") is in the earlier sentence, not in the clause of its value
    ("We're painting the shed floor, the area is 120 square feet.", "since my shed floor is only 90 sq ft, how many tins?", "11.1484", "8.36127"),
    # "gigs" are gigabytes; "memory" and "RAM" share no word, "box" ties them
    ("Our staging box runs with 16GB of RAM.", "given the staging box has 8 gigs of memory, which heap size fits?", "1.6e+10", "8e+09"),
    # a year where a date goes
    ("I joined the company in 2015.", "Sorry, I misspoke, I joined in 2012.", "y2015", "y2012"),
    # a month on its own where a date goes
    ("The orchard's last frost is usually around April 20.", "since the orchard's last frost is early May, when do I sow beans?", "m4d20", "m5"),
    # a person beside their role
    ("My landlord is Gerald.", "Send the notice to Brenda, my landlord.", "gerald", "brenda"),
    ("My daughter's piano teacher is Mr. Okafor.", "Email her piano teacher, Ms. Lindqvist, about the recital.", "okafor", "lindqvist"),
    # an amount said without its currency, of the same thing
    ("The monthly phone budget is $60.", "phone budget should be 75 now", "60", "75"),
])
def test_values_said_in_other_words_clash(older, newer, old_value, new_value):
    found = contradictions(older, "What else should I think about?", newer)
    assert [(c.older.st.value, c.newer.st.value) for c in found] == [(old_value, new_value)]


@pytest.mark.parametrize("turns", [
    ("The rain barrel holds 2 gallons.", "so the rain barrel holds about 7.6 litres"),  # the same, in litres
    ("Keep the call to 30 minutes.", "keep the call to half an hour please"),  # the same, as a fraction
    ("Phase 1 of the move is in March.", "Phase 2 is the unpacking."),  # labels, not a count that changed
    ("Stage 1 of the garden redo is done by April 4.", "Stage 2 — the raised beds — is done by June 9."),  # an aside between dashes
    ("Send the notice to Brenda, my landlord.", "Send a copy to Omar, my accountant."),  # two roles
    ("Find a desk lamp under $40 with 3 brightness levels.", "Something with a warm light."),  # a number beside an amount
    ("The monthly phone budget is $60.", "We have 2 lines on the plan."),  # a number of something else
    ("I joined the company in 2015.", "We moved house in 2019."),  # another event's year
    ("The audit report is due at the end of March.", "so the audit report is due March 31"),  # a day of that month
])
def test_the_same_value_or_another_thing_does_not_clash(turns):
    assert contradictions(*turns) == []


@pytest.mark.parametrize("older, newer", [
    ("We have no carpets in the house.", "Book a cleaner to shampoo the living room carpets on Saturday."),
    ("I'd like a route without toll roads.", "Take the toll road through the tunnel, it's faster."),
])
def test_a_thing_refused_with_no_or_without_clashes_with_asking_for_it(older, newer):
    found = contradictions(older, "Thanks, that helps.", newer)
    assert found and all(c.older.message == 0 and c.newer.message == 4 for c in found)


def test_a_refused_thing_mentioned_in_another_request_is_not_asked_for():
    assert contradictions("No meetings on Friday please.", "Move the standup meetings to Thursday.") == []


def test_two_bare_numbers_clash_once_when_an_amount_of_money_was_said_too():
    found = contradictions("The phone budget is $60.", "the batch size is 32", "the batch size is 64")
    assert [(c.older.st.value, c.newer.st.value) for c in found] == [("32", "64")]
