"""Unit tests of statement extraction and the local clash detector."""

from __future__ import annotations

import pytest

from ctxwarden.policies.cache import stable_hash
from ctxwarden.policies.clash.detect import (
    CONFLICTING_FACTS,
    CONTRADICTORY_PREFERENCES,
    DUPLICATE_FACTS,
    OUTDATED_INFORMATION,
    AgentTurns,
    Located,
    local_clashes,
)
from ctxwarden.policies.text.statements.extract import extract
from tests.clash_fixtures import clashes_in, contradictions


@pytest.mark.parametrize(
    "older, newer, kind, old_value, new_value",
    [
        ("I prefer budget hotels under $50 a night.", "Actually I want a luxury 5-star hotel.", CONTRADICTORY_PREFERENCES, "budget", "luxury"),
        ("Nothing fancy, a cheap hostel is fine.", "Let's splurge on a five-star resort.", CONTRADICTORY_PREFERENCES, "budget", "luxury"),
        ("Please reply in Spanish.", "From now on answer in English.", CONTRADICTORY_PREFERENCES, "spanish", "english"),
        ("I love oysters.", "I really can't stand oysters.", CONTRADICTORY_PREFERENCES, "like", "like"),
        ("I'm vegetarian.", "I eat meat now.", CONTRADICTORY_PREFERENCES, "vegetarian", "omnivore"),
        ("I'm in New York.", "I'm in London.", CONFLICTING_FACTS, "new york", "london"),
        ("We live in Leeds.", "We've just moved to York.", CONFLICTING_FACTS, "leeds", "york"),
        ("My name is Ana.", "Sorry, my name's actually Marta.", CONFLICTING_FACTS, "ana", "marta"),
        ("I'm flying out on March 3.", "Change my departure to the 5th of March.", OUTDATED_INFORMATION, "m3d3", "m3d5"),
        ("My budget is $2,000 in total.", "My total budget is now $2,600.", OUTDATED_INFORMATION, "2000", "2600"),
        ("We are 4 people.", "There are five of us now.", OUTDATED_INFORMATION, "4", "5"),
        ("Window seat please.", "Put me on the aisle seat instead.", OUTDATED_INFORMATION, "window", "aisle"),
        ("I'll have the chicken meal.", "Switch my meal to the fish.", OUTDATED_INFORMATION, "chicken", "fish"),
        ("Book a table for 3 at 8pm.", "Can you make it 7:30pm instead?", OUTDATED_INFORMATION, "20:00", "19:30"),
    ],
)
def test_contradictions_are_found_and_typed(older, newer, kind, old_value, new_value):
    found = contradictions(older, newer)
    assert found, (older, newer)
    c = found[-1]
    assert (c.type, c.older.st.value, c.newer.st.value) == (kind, old_value, new_value)
    assert c.older.message == 0 and c.newer.message == 2


@pytest.mark.parametrize(
    "turns",
    [
        ("I like parks.", "I also like museums."),  # an addition
        ("My budget is $200 per night.", "So $1,400 for the week."),  # another scope
        ("My budget is at least $100 a night.", "But no more than $180 a night."),  # a range, not a change
        ("I'm in New York; I fly to London next week.",),  # plan vs present, one message
        ("I'm in New York.", "I'll be in London from Monday."),
        ("I live in Boston.", "I'm in Denver for a conference."),  # home vs where I am
        ("I'm in the UK.", "I'm in London."),  # London is in the UK
        ("I want an aisle seat.", "My wife wants the window seat."),  # someone else
        ("If I were rich I'd book a 5-star hotel.", "I want a budget hotel."),  # hypothetical
        ("Are luxury hotels expensive here?", "I want a cheap hotel."),  # a question
        ("I used to live in Rome.", "I live in Naples."),  # the past
        ("Cheap flights please.", "For the hotel, something luxurious."),  # different domains
        ("3 nights in Rome.", "2 nights in Venice."),  # different places
        ("I need 2 tickets for Friday's show.", "Plus 4 tickets for Saturday's show."),
        ("Leaving on May 1.", "Returning on May 9."),  # different events
        ("I'm vegan.", "I'm vegetarian, no meat at all."),  # vegan is vegetarian
        ("My parents are paying, so the hotel can be fancy.",),
    ],
)
def test_compatible_statements_are_not_flagged(turns):
    assert contradictions(*turns) == []


def test_duplicates_are_reported_as_duplicates_not_contradictions():
    found = clashes_in("I'm in London.", "As I said, I'm still in London.")
    assert [c.type for c in found] == [DUPLICATE_FACTS]


def test_negation_flips_a_preference():
    (c,) = contradictions("I don't want a luxury hotel.", "I want a luxury hotel.")
    assert c.older.st.negated and not c.newer.st.negated and c.type == CONTRADICTORY_PREFERENCES


def test_bound_words_are_not_negations():
    (st,) = extract("I can spend no more than €80 a night.")
    assert (st.slot, st.value, st.negated) == ("amount.budget.night.max.eur", "80", False)


@pytest.mark.parametrize("text", [
    "User location: New York\nUser location: London",
    "I want a window seat. No wait, make that an aisle seat.",
    "Scale the deployment from 2 replicas to 5 replicas.",
    "Run operation 7 of service 1.",
])
def test_values_within_one_message_are_never_a_clash(text):
    assert contradictions(text) == []


def test_the_same_values_in_two_messages_do_clash():
    (c,) = contradictions("User location: New York", "User location: London")
    assert (c.older.message, c.newer.message) == (0, 2)


def test_a_huge_message_costs_linear_time():
    """One message's statements are never compared with each other, so a message with thousands of
    them is read in linear time (issue 41: a 100 KB message took 64 s in Matcher.same_subject)."""
    import time

    line = "Set the replicas of service {0} to {0} and the timeout of job {0} to {1} seconds. "
    small, big = "".join(line.format(i, i + 3) for i in range(100)), "".join(line.format(i, i + 3) for i in range(1000))
    t0 = time.perf_counter()
    assert contradictions(small) == []
    t1 = time.perf_counter()
    assert contradictions(big) == []
    t2 = time.perf_counter()
    assert (t2 - t1) < 30 * (t1 - t0) + 0.5  # 10× the text: ~10× the time (100× if pairs were compared)


def test_price_level_without_domain_takes_the_domain_of_the_conversation():
    (c,) = contradictions("Find me a budget hotel in Lyon.", "Let's go luxury after all.")
    assert c.slot == "tier.hotel" and c.label == "hotel preference"


def test_a_count_without_qualifier_inherits_the_latest_one():
    (c,) = contradictions("Book 2 nights in Rome.", "Make it 3 nights.")
    assert c.slot == "count.nights>rome" and (c.older.st.value, c.newer.st.value) == ("2", "3")


def test_a_chain_of_changes_pairs_each_statement_with_every_earlier_conflict():
    found = clashes_in("I want a budget hotel.", "I want a luxury hotel.", "I want a budget hotel again.")
    pairs = [(c.type, c.older.message, c.newer.message) for c in found]
    assert (CONTRADICTORY_PREFERENCES, 0, 2) in pairs and (CONTRADICTORY_PREFERENCES, 2, 4) in pairs
    assert (DUPLICATE_FACTS, 0, 4) in pairs


def test_statement_spans_point_at_the_sentence_and_the_value():
    text = "Hi there. I'm looking for budget hotels under $50 a night. Thanks!"
    tier = next(st for st in extract(text) if st.slot == "tier.hotel")
    assert text[tier.start:tier.end] == "I'm looking for budget hotels under $50 a night."
    assert text[tier.vstart:tier.vend] == "budget hotels"


# ----------------------------------------------------------------------------- natural text: subject, scope, steps, corrections


@pytest.mark.parametrize(
    "older, newer",
    [
        ("The deploy window opens on November 4.", "Heads-up: the deploy window moved to November 11."),
        ("The cache TTL should be 10 minutes.", "Set the cache TTL to 1 hour."),
        ("Our landlord is Greta Lindqvist.", "The landlord is now Omar Haddad."),
        ("The nightly export writes to bucket raw-eu-2.", "The nightly export writes to bucket raw-us-1."),
        ("Please archive the old invoices.", "Do not archive the old invoices."),
    ],
)
def test_natural_paraphrases_of_one_fact_clash(older, newer):
    assert contradictions(older, newer), (older, newer)


@pytest.mark.parametrize(
    "turns",
    [
        ("Our hiring budget is $20,000.", "The conference travel budget is $6,000."),  # two budgets
        ("The blue team has 9 members.", "The red team has 14 members."),  # two teams
        ("My daughter needs a booster seat.", "I need a seat with extra legroom."),  # whose
        ("The cache TTL should be 60 minutes.", "So the cache TTL is an hour."),  # one value, other units
        ("Run the scraper with a page size of 25.", "Rerun it with a page size of 100."),  # the next run of a step
        ("Fetch the prices for 3 items.", "Now do the same for 9 items."),
    ],
)
def test_scopes_steps_and_restatements_do_not_clash(turns):
    assert contradictions(*turns) == []


def test_an_explicit_correction_is_reported_as_one():
    (c,) = contradictions("The standup is at 9:30am.", "Sorry, I meant 10:30am for the standup.")
    assert c.correction and (c.older.st.value, c.newer.st.value) == ("09:30", "10:30")
    (plain,) = contradictions("The standup is at 9:30am.", "The standup is at 10:30am now.")
    assert not plain.correction


# ----------------------------------------------------------------------------- values read by different rules, categorical values


def clashes_in_conversation(messages: list[dict]):
    """The local detector on a whole conversation (assistant turns included), without embeddings."""
    found = [Located(i, -1, f"{stable_hash(m['content'])}#{i}", st)
             for i, m in enumerate(messages) if m["role"] == "user" for st in extract(m["content"])]
    return [c for c in local_clashes(found, agent=AgentTurns(messages)) if not c.duplicate]


@pytest.mark.parametrize(("older", "newer"), [
    # a count read by a count rule and a bare number said about the same event
    ("We're expecting about 80 attendees at the gala.", "Attendance at the gala is up to 120 now."),
    # a budget read by the amount rule and an amount read on its own
    ("The maximum spend on the offsite is 9,000 euros.", "Let's cap the offsite at 12,000 euros."),
    # durations in years and binary data units
    ("The lease should run for three years.", "Make the lease term four years."),
    ("Give the cache container 256Mi of memory.", "The cache container needs 1Gi of memory."),
    # categorical values: a format, a colour, a spice level, a meeting mode, a frequency
    ("Send the weekly digest as a PDF.", "Actually, send the weekly digest as HTML."),
    ("Paint the fence in dark green.", "I changed my mind, paint the fence white."),
    ("Make the chili extra hot.", "Keep the chili mild after all."),
    ("Book my next dental check-up in person.", "Book the dental check-up as a video appointment instead."),
    ("Back up the photos weekly.", "Back up the photos every day."),
    # a polarity said with a verb
    ("Turn on two-factor login for the admin accounts.", "Two-factor login for the admin accounts should be switched off."),
    # a date with a year, corrected in the past tense
    ("The company was founded on 2 March 2011.", "Sorry, my mistake: the company was founded on 2 March 2012."),
    # a correction that names the value it takes back
    ("Buy 3 gallons of the primer.", "oops, 3 litres not 3 gallons"),
    # the clause before a mention of someone else is still the user's
    ("Book a table for 3.", "It'll be 4 of us, my cousin is coming."),
])
def test_one_thing_said_two_ways_by_different_rules_clashes(older, newer):
    assert contradictions(older, newer), (older, newer)


@pytest.mark.parametrize("turns", [
    ("The green plan costs $20 a month.", "The gold plan costs $45 a month."),  # colours that say which plan
    ("Our support client repo is pinned to Node 18.", "The billing service repo runs on Node 20."),  # two repos
    ("Export the invoices as CSV.", "Also export the invoices as JSON."),  # one more format
    ("I want to visit Porto.", "I'd also like to see Braga."),
    ("Keep the summaries brief.", "Short summaries, please."),  # one length said twice
])
def test_scopes_additions_and_restatements_of_categorical_values_do_not_clash(turns):
    assert contradictions(*turns) == []


def test_a_value_the_agent_already_used_is_a_step_when_the_user_asks_for_another():
    messages = [
        {"role": "user", "content": "Check availability for the 2pm slot."},
        {"role": "assistant", "content": "The 2pm slot is taken."},
        {"role": "user", "content": "How about 4pm instead?"},
    ]
    assert clashes_in_conversation(messages) == []
    # the same change with no run in between is a change of mind
    messages[1] = {"role": "assistant", "content": "Noted."}
    assert clashes_in_conversation(messages)
    # and a stated preference the agent merely repeated back still holds until changed
    preference = [
        {"role": "user", "content": "I prefer the 2pm slot."},
        {"role": "assistant", "content": "Great, 2pm it is."},
        {"role": "user", "content": "Actually, make it 4pm."},
    ]
    assert clashes_in_conversation(preference)


@pytest.mark.parametrize("turns", [
    ("Write a function that parses the CSV file.", "Write unit tests for the function."),
    ("Add a login page.", "Add a logout button to the login page."),
    ("Refactor the payment module.", "Rename the payment module's main class to Billing."),
    ("Summarize the report.", "Translate the summary of the report into German."),
    ("Open the config file.", "Change the port in the config file to 8080."),
    ("Search for flights to Lisbon.", "Sort the flights by price."),
    ("Draft an email to the landlord about the leak.", "Make the email to the landlord shorter."),
    ("Deploy the service to staging.", "Deploy the service to production."),
])
def test_successive_instructions_on_one_object_are_steps_not_clashes(turns):
    """An agent's user builds on the same object turn after turn; cutting the earlier instruction
    (prefer_recent) would lose what the work is about."""
    assert contradictions(*turns) == []


def test_what_the_agent_did_is_its_text_and_its_calls_not_the_message_envelope():
    messages = [
        {"role": "user", "content": "Check the 2pm slot."},
        {"role": "assistant", "content": [{"type": "text", "text": "Checking."}],
         "tool_calls": [{"id": "call_9", "type": "function", "function": {"name": "find_slot", "arguments": '{"at": "2PM"}'}}]},
        {"role": "tool", "tool_call_id": "call_9", "content": "taken"},
    ]
    agent = AgentTurns(messages)
    assert agent.text(1) == 'checking.\nfind_slot {"at": "2pm"}' and agent.text(2) == "taken"
    assert agent.text(0) == ""  # the user's own words are not the agent's
    assert "call_9" not in agent.text(1) and "function" not in agent.text(1)
