"""How the clash detector reads what people write: an object said as "it", a workflow's next step,
amounts in words or with a "k", a question opened by what it takes as given, and a date or time
cue that belongs to its own clause.

Phrasings here are not the bench's: they check that the mechanisms generalize."""

from __future__ import annotations

import pytest

from ctxwarden.policies.text.slots import spelled_number
from ctxwarden.policies.text.statements.extract import extract
from ctxwarden.policies.text.statements.frames import REFERENT, frame_statements
from tests.clash_fixtures import contradictions
from tests.test_clash_frames import clashes


def _values(text: str, prefix: str) -> list[str]:
    return [st.value for st in extract(text) if st.slot.startswith(prefix)]


# ----------------------------------------------------------------------------- "it", "they"


def test_a_pronoun_object_is_read_as_a_referent():
    assert [st.subject for st in frame_statements("Please move it to the guest room.")] == [(REFERENT,)]
    assert [st.subject for st in frame_statements("Make sure they're going to the loading dock.")] == [(REFERENT,)]
    assert [st.subject for st in frame_statements("Move the sofa to the guest room.")] == [("sofa",)]


@pytest.mark.parametrize(
    "turns",
    [
        ("Deliver the new mattress to my apartment on Cedar Lane.", "It's a king size.", "Deliver it to the storage unit instead."),
        ("Store the backups in the Frankfurt bucket.", "Encrypt them first.", "Actually, store them in the Dublin bucket."),
        ("Keep the spare key in the kitchen drawer.", "What a day.", "Did I say drawer? It goes in the glovebox."),
    ],
)
def test_an_object_said_as_it_is_the_one_named_before(turns):
    found = clashes(*turns)
    assert found and found[0].slot.startswith("frame."), found


@pytest.mark.parametrize(
    "turns",
    [
        # the next step of a workflow moves nothing back
        ("Export the invoices to a spreadsheet.", "Then email them to accounting."),
        ("Build the image in CI.", "once it's green, push it to the registry"),
        ("Upload the slides to the shared folder.", "After that, send it to the speakers."),
        ("Commit the fix to the feature branch.", "now merge it into main"),
        # "it" after an indefinite frame is not that frame's object
        ("Ship the parcel to my office.", "Write a thank-you card to the courier.", "Keep it in the mailroom until I'm back."),
        # nothing named before: nothing to compare
        ("Put it in the fridge.", "Put the cake on the table."),
    ],
)
def test_a_pronoun_frame_that_is_no_clash(turns):
    assert not clashes(*turns), clashes(*turns)


# ----------------------------------------------------------------------------- amounts


@pytest.mark.parametrize(
    "phrase, value",
    [("two thousand", 2000), ("twenty-five", 25), ("a hundred and five", 105), ("three million", 3e6),
     ("ninety nine", 99), ("a thousand", 1000), ("orange", None), ("and", None)],
)
def test_a_number_in_words(phrase, value):
    assert spelled_number(phrase) == value


@pytest.mark.parametrize(
    "text, slot, value",
    [
        ("Our table has about 80k rows.", "v.count:row", "80000"),
        ("The survey reached two thousand households.", "v.count:household", "2000"),
        ("We expect twenty-five guests.", "count.people", "25"),
        ("The app has 1.5 million users.", "v.count:user", "1.5e+06"),
        ("I walk 12k steps a day.", "v.count:step", "12000"),
        ("My salary is 95k.", "v.num", "95000"),
    ],
)
def test_amounts_are_read_as_people_write_them(text, slot, value):
    assert value in _values(text, slot), extract(text)


def test_a_title_is_not_an_amount():
    assert not _values("We watched Twelve Monkeys again last night.", "v.count")
    assert not _values("My favourite song is A Thousand Miles.", "v.qty")
    assert _values("Put my 401k statements in the folder.", "v.id") == ["401k"]  # a pension plan, not 401,000


def test_an_amount_in_words_clashes_with_the_same_amount_in_digits():
    assert contradictions("Our mailing list has 40k subscribers.", "With about three thousand subscribers on the list, what open rate is normal?")
    assert not contradictions("Our mailing list has 3k subscribers.", "For three thousand subscribers, which plan do I need?")


# ----------------------------------------------------------------------------- questions


@pytest.mark.parametrize(
    "text, prefix, value",
    [
        ("With a budget of $300 is a standing desk realistic?", "amount.", "300"),
        ("since my shift ends at 11pm what can I cook quickly?", "v.time", "23:00"),
        ("Given only 12 people in the club should we rent the big hall?", "count.", "12"),
    ],
)
def test_a_question_states_what_it_opens_with(text, prefix, value):
    assert any(value in v for v in _values(text, prefix)), extract(text)


def test_a_question_word_after_the_opening_preposition_asks_it():
    assert not _values("With which 3 tools do you build this?", "v.")
    assert not _values("Since when is the meeting at 10am?", "time.")


# ----------------------------------------------------------------------------- cues of their own clause


def test_a_cue_spent_on_its_own_clause_does_not_date_another_clause():
    text = "my check-in is on the 14th, could you book a table at the bistro for dinner on the 15th"
    assert _values(text, "date.check-in") == ["d14"], extract(text)
    times = "the ceremony starts at 4pm, guests can park near the north gate from 3:30"
    assert _values(times, "time.ceremony") == ["16:00"], extract(times)


def test_a_cue_still_covers_a_bare_list_of_values():
    assert not _values("Flights on March 3 and March 10.", "date.departure")  # two dates, one cue: a choice, not a statement


# ----------------------------------------------------------------------------- who holds a role


@pytest.mark.parametrize(
    "text, name, role",
    [
        ("Priyanka is the product owner for the billing squad.", "priyanka", "owner"),
        ("The release captain this sprint is Marco.", "marco", "captain"),
        ("Loop in Hannah, she's the account manager for Acme.", "hannah", "manager"),
        ("The on-call engineer is Wei — page him first.", "wei", "engineer"),
    ],
)
def test_a_name_and_the_role_it_holds(text, name, role):
    held = [st for st in extract(text) if st.slot == "v.name" and st.value == name]
    assert held and role in held[0].subject, extract(text)


def test_a_judgement_or_a_pronoun_holds_no_role():
    assert not [st for st in extract("Marco is the best.") if st.slot == "v.name"]
    assert not [st for st in extract("He is the lead singer of the band.") if st.slot == "v.name"]


def test_two_people_in_one_role_clash_and_two_roles_do_not():
    assert contradictions("The release captain this sprint is Marco.", "Ask Dana, she's the release captain this sprint.")
    assert not contradictions("The release captain this sprint is Marco.", "Ask Dana, she's the QA lead this sprint.")
