"""Values said as limits ("after 6pm", "nothing departing after 9pm", "under $1,000", "at least 8GB")
compared with the value later asked for, and a value in a noun phrase someone else owns ("her 10mg dose").

Phrasings here are not the bench's: they check that the mechanisms generalize."""

from __future__ import annotations

import pytest

from ctxwarden.policies.text.statements.bounds import times_compatible
from ctxwarden.policies.text.statements.extract import extract
from tests.clash_fixtures import clashes_in, contradictions


def _times(text: str) -> list[str]:
    return [st.value for st in extract(text) if st.slot.startswith("time.") or st.slot == "v.time"]


@pytest.mark.parametrize(
    "text, value",
    [
        ("I'd like to leave after 6pm.", ">18:00"),
        ("The meeting has to end before 3pm.", "<15:00"),
        ("I need to arrive no later than noon.", "<12:00"),  # the bound's own "no" is no refusal
        ("I want to land no earlier than 8am.", ">08:00"),
        ("Nothing departing after 9pm for me, ever.", "<21:00"),  # a refused bound is the opposite one
        ("I don't take calls before 10 am.", ">10:00"),
        ("Pick me up at 8:15 tomorrow.", "08:15"),  # a time itself stays a point
        ("Set a reminder 10 min before the 15:00 standup.", "15:00"),  # an offset from a time, not a limit
    ],
)
def test_a_time_after_after_or_before_is_read_as_a_bound(text, value):
    assert value in _times(text), _times(text)


@pytest.mark.parametrize(
    "a, b, ok",
    [
        (">21:00", "23:45", True),
        ("<21:00", "23:45", False),
        (">21:00", "00:30", True),  # just after midnight is still after 9pm
        ("<21:00", "00:30", False),
        (">18:00", "<21:00", True),  # between 6 and 9
        (">21:00", "<18:00", False),
        (">18:00", ">20:00", False),  # the same limit, revised
        ("19:00", "19:00", True),
    ],
)
def test_bounds_and_points_are_compatible_when_both_can_hold(a, b, ok):
    assert times_compatible(a, b) is ok
    assert times_compatible(b, a) is ok


@pytest.mark.parametrize(
    "turns",
    [
        ("No flights departing after 9pm for me please.", "Book me the 11:45pm flight to JFK."),
        ("I'd like to leave after 6pm.", "OK, book the 5pm departure."),
        ("I have to land no later than noon.", "Book the flight that lands at 2pm."),
        ("I never take meetings before 10am.", "Schedule the meeting for 8:30am tomorrow."),
    ],
)
def test_a_time_outside_a_stated_limit_clashes(turns):
    assert len(contradictions(*turns)) == 1, turns


@pytest.mark.parametrize(
    "turns",
    [
        # before, a limit's time was taken for the time itself: "after 6pm" clashed with 7pm
        ("I'd like to leave after 6pm.", "OK, book the 7pm departure."),
        ("No flights departing after 9pm for me please.", "Book me the 8:30pm flight to JFK."),
        ("I have to land no later than noon.", "Book the flight that lands at 11am."),
        ("I never take meetings before 10am.", "Schedule the meeting for 2pm tomorrow."),
    ],
)
def test_a_time_within_a_stated_limit_does_not_clash(turns):
    assert contradictions(*turns) == [], turns


@pytest.mark.parametrize(
    "turns, clash",
    [
        (("My dad takes 20 mg of atorvastatin every night.", "Set a reminder on his phone for his 40mg atorvastatin."), True),
        (("Our daughter has 3 goldfish in one tank.", "Buy food for their 5 goldfish, they're hungry."), True),
        # the user's own dose is not the relative's
        (("My dad takes 20 mg of atorvastatin every night.", "Set a reminder for my 40mg atorvastatin."), False),
    ],
)
def test_a_value_in_a_noun_phrase_someone_else_owns_is_theirs(turns, clash):
    assert bool(contradictions(*turns)) is clash, turns


@pytest.mark.parametrize(
    "turns",
    [
        ("Keep the monitor under $400.", "Go ahead and order the $529 monitor."),
        ("The hike should be no more than 12 km.", "Plan the 18 km hike for Saturday."),
        ("I want at least 16GB of memory in the new laptop.", "Order the laptop with 8GB of memory."),
        ("Find me a flight with no more than 2 stops.", "Book the flight with 3 stops."),
        ("My budget for the sofa is $900.", "Order the $1,150 sofa."),  # a budget is a limit by what it is
    ],
)
def test_an_amount_outside_a_stated_limit_clashes(turns):
    assert len(contradictions(*turns)) == 1, turns


@pytest.mark.parametrize(
    "turns",
    [
        # before, the limit's amount was taken for the amount itself: "under $400" clashed with $350
        ("Keep the monitor under $400.", "Go ahead and order the $349 monitor."),
        ("The hike should be no more than 12 km.", "Plan the 9 km hike for Saturday."),
        ("I want at least 16GB of memory in the new laptop.", "Order the laptop with 32GB of memory."),
        ("My budget for the sofa is $900.", "Order the $850 sofa."),
    ],
)
def test_an_amount_within_a_stated_limit_neither_clashes_nor_repeats_it(turns):
    assert clashes_in(*turns) == [], turns  # no clash, and no duplicate: the point is not the limit said again


@pytest.mark.parametrize(
    "turns",
    [
        ("Keep the monitor under $400.", "Actually, keep it under $300."),  # a revised limit
        ("My budget for the laptop is $1,000.", "Actually make the laptop budget $1,200."),  # "make" here sets, it is no income
        ("I'd like to leave after 6pm.", "Change that, I'd like to leave after 8pm."),
    ],
)
def test_a_limit_revised_the_same_way_clashes(turns):
    assert len(contradictions(*turns)) == 1, turns


def test_a_limit_moved_from_one_search_to_the_next_is_a_step_not_a_clash():
    # each search runs with its own limit; only a point outside a standing limit contradicts it
    assert contradictions("Show me trails near Porto under 10 km.", "Show me trails near Porto under 15 km.") == []
    assert len(contradictions("Show me trails near Porto under 10 km.", "Show me the 14 km trail near Porto.")) == 1
