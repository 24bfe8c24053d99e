"""Clashes said through meaning rather than through one shared value: a name given as the value of
a role ("my boss is Rhea" … "Bashir, my boss"); a refused noun and a later kind of it ("no pets"
… "we've got a beagle"); what a question takes as given ("the
cluster we run on 3 nodes").

Phrasings here are not the bench's: they check that the mechanisms generalize."""

from __future__ import annotations

import pytest

from ctxwarden.policies.cache import stable_hash
from ctxwarden.policies.clash.detect import Located, local_clashes
from ctxwarden.policies.text.statements.extract import extract
from tests.clash_fixtures import contradictions

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


# ----------------------------------------------------------------------------- a refused noun and a kind of it


@pytest.fixture(scope="module")
def matcher():
    from ctxwarden.policies.text.statements.match import Matcher
    from ctxwarden.proxy.config import EmbedderChoice
    from ctxwarden.proxy.embeddings import build_embedder

    return Matcher(build_embedder(EmbedderChoice(provider="wordllama")))


def meant(matcher, *turns: str):
    found = []
    for i, text in enumerate(turns):
        found += [Located(2 * i, -1, f"{stable_hash(text)}#{i}", st) for st in extract(text)]
    return [c for c in local_clashes(found, matcher) if not c.duplicate]


@pytest.mark.parametrize(
    "turns",
    [
        ("We don't own any pets.", "Find a flat where dogs are allowed, we've got a beagle."),
        ("I have no siblings.", "Book a table for me and my brother on Friday."),
        ("I don't want any pets.", "Add a puppy to the plan too."),  # an addition is no new run of a step
        ("I don't have any allergies.", "I'm allergic to cats, actually."),  # one word in two forms: no embedder needed
    ],
)
def test_a_refused_noun_clashes_with_a_later_kind_of_it(matcher, turns):
    assert meant(matcher, *turns), turns


def test_a_refused_noun_in_another_form_clashes_without_an_embedder():
    assert contradictions("I don't have any allergies.", "I'm allergic to cats, actually.")


@pytest.mark.parametrize(
    "turns",
    [
        ("No cars in the city centre, please.", "Find me a parking garage near the station."),
        ("I'm not taking any medication.", "Book a doctor appointment for Tuesday."),
        ("We have no pets.", "Recommend a vet clinic near the office for a colleague."),
        ("No desserts for me.", "Add a sparkling water too."),
        ("There are no allergies in our family.", "Oh, my husband is allergic to shellfish."),  # his, not the user's
    ],
)
def test_a_refused_noun_and_an_unrelated_or_someone_elses_later_noun_do_not_clash(matcher, turns):
    assert not meant(matcher, *turns), turns


# ----------------------------------------------------------------------------- what a question takes as given


@pytest.mark.parametrize(
    "turns",
    [
        ("Our postgres cluster runs on 5 nodes.", "Can you tune the postgres cluster we run on 3 nodes?"),
        ("The staging bucket lives in Frankfurt.", "How do I lock down the staging bucket we keep in Dublin?"),
        ("I don't drink coffee at all.", "Is it bad to have the coffee I drink after 6pm?"),
    ],
)
def test_a_relative_clause_inside_a_question_is_read_as_stated(turns):
    assert contradictions(*turns), turns


@pytest.mark.parametrize(
    "turns",
    [
        # asked, not given: a modal or a wish inside the relative clause, or no relative clause at all
        ("Our postgres cluster runs on 5 nodes.", "Should we run the postgres cluster on 3 nodes?"),
        ("Our postgres cluster runs on 5 nodes.", "What is the node count we should run on, 3 nodes?"),
        ("The staging bucket lives in Frankfurt.", "Is the bucket I want to create allowed in Dublin?"),
        # the question restates what was said
        ("Our postgres cluster runs on 5 nodes.", "Can you tune the postgres cluster we run on 5 nodes?"),
    ],
)
def test_what_a_question_asks_or_restates_does_not_clash(turns):
    assert not contradictions(*turns), turns


def test_a_statement_a_question_takes_as_given_belongs_to_the_whole_question():
    """An edit marks or cuts a statement's sentence: for a presupposed part that is the question,
    never a fragment of it ("Can you tune the ?")."""
    text = "Thanks. Can you tune the postgres cluster we run on 3 nodes?"
    (st,) = [st for st in extract(text) if st.value == "3"]
    assert st.given and text[st.start:st.end] == "Can you tune the postgres cluster we run on 3 nodes?"
    assert text[st.vstart:st.vend] == "3 nodes"


@pytest.mark.parametrize(
    "turns",
    [
        ("Our accountant is Maria Lopez.", "Forward the receipts to our accountant Daniel Reyes tonight."),
        ("The vet we use is Dr. Okafor; she's great.", "Book a checkup with my vet Hannah asking about the booster shots."),
        ("My landlord is Gerald.", "Write to my landlord Martin asking about the deposit."),
        ("My manager is Priya, and she's great.", "My manager Tom wants the deck by Friday."),
    ],
)
def test_a_name_set_right_after_a_role_is_that_role_s_value(turns):
    assert contradictions(*turns), turns


@pytest.mark.parametrize(
    "turns",
    [
        # the name beside the role is not the role's value, or it belongs to another role
        ("My landlord is Gerald.", "Ship the lamp to my office in Denver."),
        ("My best man is my brother Jake.", "Write a thank-you note to my best man Jake."),
        ("The executor of my will is my sister Anne.", "Also list my brother Robert as a beneficiary."),
        ("My manager is Priya.", "Send my sister Clara the photos asking what she thinks."),
    ],
)
def test_a_name_beside_another_role_or_in_a_place_does_not_clash(turns):
    assert not contradictions(*turns), turns


@pytest.mark.parametrize(
    "turns",
    [
        ("My grandparents live in Phoenix.", "Map out a drive to my grandparents' home in Tucson, leaving friday afternoon"),
        ("my in-laws live in Boston", "can you find a florist near my in-laws' house in Hartford"),
        ("my aunts live in Leeds, near the station", "my aunts are in Bristol"),
        ("Courier the package to my office in Leeds.", "Actually ship it to my cousin's flat in Bristol instead."),
    ],
)
def test_plural_relatives_and_their_homes_are_read_as_theirs(turns):
    # a plural's possessive ("grandparents'"), its verb without -s ("live"), a home named inside a
    # request, and a request that replaces the user's earlier one whoever's place it names
    assert len(contradictions(*turns)) == 1


@pytest.mark.parametrize(
    "turns",
    [
        ("I live in Austin", "plan a drive to my parents' place in Dallas leaving saturday"),
        ("my parents live in Austin", "book me a hotel in Dallas leaving saturday"),
        ("my parents live in Austin", "my brothers' apartment in Dallas needs a new fridge"),
    ],
)
def test_someone_else_s_home_is_not_the_user_s_or_another_relative_s(turns):
    assert contradictions(*turns) == []


@pytest.mark.parametrize(
    "turns",
    [
        ("We're not buying a car this year, the bus is fine.", "Compare monthly payments on a used car from the dealer for me."),
        ("For this role we are not asking for a cover letter.", "In the application steps, list a cover letter as mandatory."),
        ("I don't own a printer.", "Send the boarding pass to my printer."),
        ("Don't add a tip for the taxi.", "Add a 10% tip for the taxi ride."),
    ],
)
def test_the_object_of_a_negated_verb_is_refused(turns):
    # "not buying a car": a determiner after a negated verb opens the thing refused, as "no car" would
    assert len(contradictions(*turns)) == 1


@pytest.mark.parametrize(
    "turns",
    [
        ("We're not buying a car this year.", "What's the bus fare to town?"),
        ("I'm not requiring a standing desk.", "Order a desk lamp for the office."),
        ("My sister doesn't own a car.", "Rent me a car for the weekend."),
        # another one of the same kind: what it is for, or which of a series
        ("Don't add a tip for the taxi.", "Add a tip for the delivery driver."),
        ("Don't open a ticket for the typo.", "Open a ticket for the login outage."),
        ("I don't need a hotel on the first night.", "Book the hotel for the second and third nights."),
        ("No dessert on Monday, please.", "Order a dessert for Thursday's dinner."),
        ("No hotel needed on the first night.", "Book the hotel for the second night."),
        ("No gift wrap for the books.", "Add gift wrap to the scarf."),
        ("I haven't got any plumber yet.", "The plumber is Dave from Hanley's."),
        # still open, not refused
        ("I haven't picked a venue yet.", "The venue is the Old Mill."),
    ],
)
def test_a_refused_thing_for_another_purpose_or_still_open_does_not_clash(turns):
    assert contradictions(*turns) == []
