"""A weekday that opens a calendar date is part of that date ("Monday, April 7"), and a quote
mark is not part of the word it opens ("'Summer Sale'"). Both used to cut a statement off from
its subject, so a changed date or value went unnoticed.

Phrasings here are not the bench's: they check that the reading generalizes."""

from __future__ import annotations

import pytest

from ctxwarden.policies.text.statements.extract import extract
from ctxwarden.policies.text.statements.subject import words
from tests.clash_fixtures import contradictions


def _dates(text: str) -> list[tuple[str, str]]:
    return [(text[s.vstart:s.vend], s.value) for s in extract(text) if s.slot == "v.date" or s.slot.startswith("date.")]


@pytest.mark.parametrize(
    ("text", "span", "value"),
    [
        ("New hire starts Monday, April 7.", "Monday, April 7", "m4d7"),
        ("I was born on Sunday, 4 May 1990.", "Sunday, 4 May 1990", "m5d4y1990"),
        ("Meet me Friday the 3rd.", "Friday the 3rd", "d3"),
        ("My flight leaves Friday, June 3, at noon.", "Friday, June 3", "m6d3"),
    ],
)
def test_a_weekday_before_a_date_is_one_date(text, span, value):
    assert _dates(text) == [(span, value)]


def test_a_weekday_followed_by_a_count_stays_a_weekday():
    assert _dates("On Friday, 3 people are coming.") == [("Friday", "wd:this:friday")]


def test_the_clause_after_a_weekday_and_comma_is_not_an_action_of_its_own():
    statements = extract("New hire starts Monday, April 7.")
    assert [s.slot for s in statements] == ["v.date"]
    assert words(statements[0].subject) == {"hire", "start"}


@pytest.mark.parametrize(
    ("first", "then"),
    [
        ("Our offsite starts Thursday, May 8.", "The offsite starts May 15, not the 8th."),
        ("The launch is scheduled for Tuesday, March 4.", "We're launching on March 11."),
        ("The kickoff is Monday, June 2, at 9am.", "The kickoff is June 9 at 9am."),
    ],
)
def test_a_date_said_with_its_weekday_clashes_with_another_date(first, then):
    assert contradictions(first, then)


def test_a_quote_mark_is_not_part_of_a_subject_word():
    statements = extract("Draft the methods para: 'All 180 respondents in the final sample completed it.'")
    subject_words = set().union(*(words(s.subject) for s in statements))
    assert subject_words and not any("'" in w or not w for w in subject_words)


def test_a_quoted_name_and_the_same_name_unquoted_are_one_subject():
    assert contradictions("The 'Summer Sale' banner goes live on June 3.", "The Summer Sale banner goes live on June 10.")
