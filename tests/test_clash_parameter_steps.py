"""A value turned up or down from the one in effect, and two of a series, are not clashes; a
correction of the same value still is.

Phrasings here are not the bench's: they check that the mechanisms generalize."""

from __future__ import annotations

import pytest

from ctxwarden.policies.text.statements.extract import extract
from ctxwarden.policies.text.statements.subject import series_of
from tests.clash_fixtures import contradictions

# ----------------------------------------------------------------------------- turned up or down


@pytest.mark.parametrize(
    ("first", "then"),
    [
        ("Run the crawler with parallelism 16.", "The site is throttling us, lower parallelism to 4."),
        ("Train with batch size 256.", "Out of memory on the GPU, cut the batch size to 64."),
        ("Give the job 2 GB of memory.", "It got OOM-killed, raise the memory to 8 GB."),
        ("Render the preview at quality 90.", "Files are huge, knock the quality down to 60."),
    ],
)
def test_a_value_turned_up_or_down_is_a_new_run_not_a_clash(first, then):
    assert not contradictions(first, then)


@pytest.mark.parametrize(
    ("first", "then"),
    [
        ("Give the job 2 GB of memory.", "Sorry, I meant 8 GB of memory for the job."),
        ("Set the batch size to 256.", "Actually, make it 64 for the batch size."),
        ("Run the crawler with 16 threads.", "Correction: it's 4 threads, not 16."),
    ],
)
def test_a_correction_of_the_same_value_still_clashes(first, then):
    assert contradictions(first, then)


@pytest.mark.parametrize(
    "text",
    [
        "Take the train to 5th Avenue.",  # motion, not a value turned up
        "Drop the kids at school by 8:30.",  # a deadline
        "Bring 2 bottles to the party.",
    ],
)
def test_motion_and_deadlines_are_not_turned_values(text):
    assert not any(st.step for st in extract(text))


def test_a_turned_value_is_a_step_only_in_the_imperative():
    assert any(st.step for st in extract("Reduce the dose to 5 mg."))
    assert not any(st.step for st in extract("In eco mode it lasts 60 minutes, dropping to 25 minutes in boost mode."))


# ----------------------------------------------------------------------------- two of a series


@pytest.mark.parametrize(
    ("text", "positions"),
    [
        ("First round: 10 questions, 5 minutes.", {"1"}),
        ("For the second half of the workshop, 40 minutes.", {"2"}),
        ("Her 3rd session is shorter.", {"3"}),
        ("Wait a second.", set()),
        ("Set the timeout to 30 seconds.", set()),
        ("On second thought, keep it.", set()),
        ("Deploy it there first.", set()),  # an adverb
        ("Book me first class.", set()),  # a class of travel
        ("The review is on June 3rd.", set()),  # a day of a month
        ("The review is on the 3rd.", set()),
        ("Write a 90-second pitch.", set()),
    ],
)
def test_which_of_a_series_a_sentence_names(text, positions):
    assert set(series_of(text.lower())) == positions


def test_two_of_a_series_with_their_own_values_do_not_clash():
    assert not contradictions("First session: intro to git, 45 minutes.",
                              "For the second session switch to branching, 30 minutes.")
    assert not contradictions("The first leg of the relay is 400 m.", "The third leg of the relay is 800 m.")


def test_one_of_a_series_said_twice_with_two_values_clashes():
    assert contradictions("The first leg of the relay is 400 m.", "Correction: the first leg of the relay is 800 m.")


def test_an_ordinal_that_is_the_value_itself_still_clashes():
    """"the 2nd floor" … "the 4th floor": the ordinal is what is compared, not which one is meant."""
    assert series_of("deliver it to the 2nd floor", (18, 21)) == frozenset()


# ----------------------------------------------------------------------------- in person or online


@pytest.mark.parametrize(
    ("first", "then"),
    [
        ("For the Spanish course I want in-person classes.", "Actually, put me in the online class for the Spanish course."),
        ("I want my piano lessons in person.", "Book my piano lessons as an online lesson from now on."),
    ],
)
def test_an_online_class_or_lesson_is_the_other_meeting_mode(first, then):
    assert contradictions(first, then)


# ----------------------------------------------------------------------------- how much of a listing


def test_how_much_of_a_listing_to_take_is_set_anew_for_each_run():
    assert not contradictions("Fetch the latest 20 commits on main.", "Only merges there, fetch the latest 200.")
    assert not contradictions("Tail the last 50 lines of the worker log.", "Nothing useful, the last 400 then.")


def test_a_window_said_of_the_user_or_corrected_still_clashes():
    assert contradictions("I've lived in Denver for the past 5 years.", "I've been in Denver the past 7 years.")
    assert contradictions("Summarise the last 3 emails from Dana.", "Correction: the last 4 emails, I missed one.")


# ----------------------------------------------------------------------------- "too", requests asked, "at home in"


def test_too_before_a_word_intensifies_and_adds_nothing():
    """"nothing too spicy" is no second run of a step: the age said with it still corrects."""
    assert contradictions("I'm 34 and want a beginner yoga class.", "To be clear, I'm 43, so nothing too intense.")
    assert any(st.step for st in extract("Now give me a 200 pixel version too."))  # at the end it adds


def test_a_request_asked_as_a_question_is_a_request():
    assert contradictions("Could you reply in Portuguese please?", "Switch to Italian, please.")


def test_at_home_in_a_city_is_where_the_user_is():
    assert contradictions("I'm at home in Bristol this week, catching up on email.", "Correction, I'm in Cardiff this week.")


def test_then_closes_a_run_only_after_a_request():
    """"check the 5th then" runs the step again; "pickup at 7 then" settles a value, and it changes."""
    assert any(st.step for st in extract("Check the 5 pm slot then."))
    assert contradictions("My pickup time is 6 pm, near the north gate.", "Hmm, the game ends late. Pickup at 7 pm then.")
