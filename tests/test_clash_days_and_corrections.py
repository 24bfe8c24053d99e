"""How the clash detector reads a day counted from today, a rate, a reference number said
shorter, and a correction that names what it takes back.

Phrasings here are not the bench's: they check that the mechanisms generalize."""

from __future__ import annotations

import pytest

from ctxwarden.policies.text.statements.compare import compatible
from ctxwarden.policies.text.statements.extract import extract
from tests.clash_fixtures import contradictions


def _dates(text: str) -> list[tuple[str, bool]]:
    return [(st.value, st.negated) for st in extract(text) if st.slot.startswith(("v.date", "date."))]


# ----------------------------------------------------------------------------- days from today


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("The recital is tomorrow.", "in:1"),
        ("The inspection is the day after tomorrow.", "in:2"),
        ("Our launch is in two weeks.", "in:14"),
        ("The closing is 10 days from now.", "in:10"),
        ("The audit is a month out.", "in:30"),
    ],
)
def test_a_day_counted_from_today(text, value):
    assert _dates(text) == [(value, False)]


def test_not_until_states_the_day():
    assert _dates("The move isn't until five weeks from now.") == [("in:35", False)]
    assert _dates("The handover won't happen until tomorrow.") == [("in:1", False)]


def test_a_duration_after_a_count_from_today_is_still_a_duration():
    assert not _dates("The course takes two weeks.")
    assert not _dates("I ran 5 km in 30 minutes.")


@pytest.mark.parametrize(
    ("a", "b", "together"),
    [
        ("in:14", "in:14", True),
        ("in:14", "in:21", False),
        ("in:30", "in:28", True),  # a month and four weeks
        ("in:3", "wd:this:friday", True),
        ("in:21", "wd:next:friday", False),
        ("in:0", "wd:next:monday", False),
        ("in:40", "m6d3", True),  # no calendar: a count from today and a date cannot be compared
    ],
)
def test_days_from_today_compare_with_each_other_and_with_weekdays(a, b, together):
    assert compatible("v.date", a, b) is together
    assert compatible("v.date", b, a) is together


def test_two_days_from_today_for_one_event_clash():
    assert contradictions("The board meeting is tomorrow.", "Remind me what to prep.", "Hmm, the board meeting is in three weeks actually.")
    assert contradictions("My driving test is this Thursday.", "The driving test isn't until 20 days from now, so plan lessons for that.")
    assert not contradictions("The board meeting is next Tuesday.", "The board meeting is in 6 days, so book the room.")
    assert not contradictions("The dentist visit is tomorrow.", "The school concert is in three weeks.")


# ----------------------------------------------------------------------------- rates


@pytest.mark.parametrize(
    ("text", "slot", "value"),
    [
        ("My car payment is $420 a month.", "v.money:usd", "420"),
        ("She walks 8 km a day.", "v.qty:length", "8000"),
    ],
)
def test_a_rate_is_one_value(text, slot, value):
    found = [(st.slot, st.value) for st in extract(text) if st.slot.startswith("v.")]
    assert found == [(slot, value)]  # "a month", "a day": what it is counted per, not a duration


def test_two_rates_for_two_things_do_not_clash():
    assert not contradictions("My car payment is $420 a month.", "The gym costs $60 a month.")


# ----------------------------------------------------------------------------- reference numbers


def test_a_reference_number_said_shorter_compares_with_the_full_one():
    assert contradictions("My postal code is 10115.", "What bakeries are near me?", "sorry, postal is 10117")
    assert not contradictions("My postal code is 10115.", "Order 3 loaves.")  # a number about something else


# ----------------------------------------------------------------------------- corrections


@pytest.mark.parametrize(
    "turns",
    [
        ("I'm allergic to shellfish.", "Plan a dinner menu for Friday.", "Sorry, I mean the allergy is to peanuts, not shellfish."),
        ("Put the vase on the mantel.", "Oops, the clock goes on the mantel, not the vase."),
    ],
)
def test_a_correction_takes_back_what_it_names(turns):
    assert contradictions(*turns)


def test_a_new_value_after_forgetting_what_was_said_replaces_it():
    found = contradictions("For the listing: the asking price is $410,000.", "Make it sound cosy.",
                           "Ignore what I wrote about the price, it's $425,000.")
    assert any(c.slot.startswith("v.money") for c in found), found


# ----------------------------------------------------------------------------- memory across days


def test_a_day_counted_from_today_is_compared_only_with_one_said_the_same_day():
    from ctxwarden.policies.memory.model import Memory
    from ctxwarden.policies.memory.supersede import compare

    now = 1_800_000_000.0
    new = tuple(extract("The demo is in two weeks."))
    same_day = Memory(id="m1", text="The demo is tomorrow.", kind="fact", scope="private", user="u", created_at=now - 60)
    day_before = Memory(id="m2", text="The demo is tomorrow.", kind="fact", scope="private", user="u", created_at=now - 86400)
    same_day.slots = day_before.slots = tuple(st.slot for st in extract(same_day.text))
    assert compare(new, [same_day], now=now).contradicted == [same_day]
    assert compare(new, [day_before], now=now).contradicted == []  # "tomorrow" said yesterday is today: not comparable


# ----------------------------------------------------------------------------- refusals and attributes of "it"


def test_zero_refuses_what_it_counts():
    assert [st.refused for st in extract("We carry zero inventory.") if st.negated] == [("inventory",)]
    assert not [st for st in extract("Set the offset to zero.") if st.negated]
    assert contradictions("Honestly there's zero budget for ads.", "Plan the launch.", "Put the $2,000 ads budget in the plan.")


def test_a_negated_any_word_refuses_what_it_is_near_or_with():
    assert [st.refused for st in extract("I won't eat anything with mushrooms in it.") if st.negated] == [("mushroom",)]
    assert contradictions("Please don't seat us anywhere near the kitchen.", "Seat us right by the kitchen door.")


def test_an_attribute_of_it_is_an_attribute_of_what_was_named():
    assert contradictions("Keep the tone of the newsletter formal.", "Thanks.", "Could you redo it so that it reads really casual and chatty?")
    assert contradictions("The newsletter tone should be formal.", "ok", "can you change it so it is casual and fun?")
    assert not contradictions("Keep the tone of the newsletter formal.", "The tweet should sound casual.")  # another thing named


def test_a_reply_style_for_each_of_two_things_is_no_clash():
    assert not contradictions("Write the cover letter in a formal tone.", "Write the tweet in a casual tone.")
    assert contradictions("I prefer a formal tone in your answers.", "Use a casual tone from now on.")  # one style, changed
