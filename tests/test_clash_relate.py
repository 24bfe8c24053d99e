"""Clashes across slots (clash/relate.py): untyped preferences, polarity flips, replacements, diets.

Phrasings here are not the bench's: they check that the relations generalize."""

from __future__ import annotations

import pytest

from tests.clash_fixtures import contradictions


@pytest.mark.parametrize(
    "turns",
    [
        # polarity flip on one action or object, said without a typed value
        ("Please cc my assistant on every reply.", "Ok, do not cc my assistant anymore."),
        ("Minify the bundle before deploying.", "Don't minify the bundle, we need readable stack traces."),
        ("I really enjoy museums.", "Honestly I can't stand museums, skip them."),
        ("Turn on the nightly backups.", "Please stop running the nightly backups."),
        ("Add emojis to the release notes.", "No emojis in the release notes, please."),
        ("Write the scraper with Selenium.", "Use Playwright for the scraper rather than Selenium."),
        # a value put in place of an earlier one whose subject it does not repeat
        ("Mail the invoice to our office in Denver.", "Actually send it to the warehouse in Boulder instead."),
        # an untyped preference replaced by a typed one about the same subject
        ("Use semicolons as the delimiter for the export.", "Switch the delimiter to 2 pipes for the export."),
        # a meal choice the user's diet leaves out
        ("We're vegan, both of us.", "I'll take the omelette."),
        ("I'd like the salmon dish.", "Oh, and I'm vegetarian."),
    ],
)
def test_untyped_and_cross_slot_contradictions_are_found(turns):
    found = contradictions(*turns)
    assert found, turns
    assert all(c.older.message == 0 and c.newer.message == 2 for c in found)


@pytest.mark.parametrize(
    "turns",
    [
        ("My partner is vegetarian.", "I'll have the lamb."),  # someone else's diet
        ("I'm pescatarian.", "I'll have the cod."),  # fish fits
        ("Add a changelog entry.", "Also add a migration guide."),  # an addition
        ("Keep the docstrings.", "Don't touch the tests."),  # other objects
        ("Store the images in S3.", "Store the thumbnails in Redis."),  # another thing stored
        ("We'd like a room with a balcony.", "A sea view would be great too, instead of a garden view."),  # adds
        pytest.param(("Don't include the vendor folder.", "Leave the vendor folder out, as I said."),  # the same refusal
                     marks=pytest.mark.xfail(reason="'leave … out' refuses without a negator; read as asking for the folder")),
    ],
)
def test_unrelated_or_compatible_statements_do_not_clash(turns):
    assert not contradictions(*turns), turns
