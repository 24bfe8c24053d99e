"""A fact given as the reason for a question ("since the race is 10 km, how should I train?") is
usually new: it names another thing of the same kind, not the one said before. It clashes only
when it is about the same thing.

A rule that read every such reason as restating the one earlier value of its kind found four more
clashes on the bench sets and flagged nine of the ten conversations below: it was dropped, and
these keep it out."""

from __future__ import annotations

import pytest

from tests.clash_fixtures import contradictions


@pytest.mark.parametrize(
    ("first", "then"),
    [
        ("My flight lands on June 3.", "Since the hotel check-in is June 4, where can I leave my bags?"),
        ("The contract was signed on March 2.", "Since the invoice is due April 30, when should I send a reminder?"),
        ("We have 2 kids.", "Since the car has 5 seats, can we fit grandma too?"),
        ("My budget is $2,000 for the laptop.", "Given the monitor costs $300, what's left for the rest?"),
        ("Our server has 32 GB of RAM.", "Since the database needs 8 GB, how much is left for the cache?"),
        ("I run 5 km every morning.", "Since the race is 10 km, how should I train?"),
        ("The conference starts on May 12.", "As my talk is on May 14, when should I arrive?"),
        ("Our office is in us-east-1.", "Since the backups go to eu-west-1, what's the egress cost?"),
        ("I'm moving on August 1.", "For our August 15 housewarming, what food should we get?"),
        ("The project kicked off on January 10.", "Since the demo is February 20, what should we show?"),
    ],
)
def test_a_reason_about_another_thing_is_not_a_clash(first, then):
    assert not contradictions(first, then)


@pytest.mark.parametrize(
    ("first", "then"),
    [
        ("The new office opens on May 5.", "Since our office opens May 19, when should we order furniture?"),
        ("The tank holds 40 litres.", "Since the tank only takes 25 litres, how much will a fill-up cost?"),
        ("We're flying out of Denver on the 12th of July.", "For our July 19 flight, when should we get to the airport?"),
    ],
)
def test_a_reason_about_the_same_thing_with_another_value_clashes(first, then):
    assert contradictions(first, then)
