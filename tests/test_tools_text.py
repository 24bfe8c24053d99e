"""The tools policy's text helpers: what a definition says, what a request asks, what it forces."""

from __future__ import annotations

import numpy as np
import pytest

from ctxwarden.policies.tools.ranking import LexicalDoc, LexicalIndex
from ctxwarden.policies.tools.selection import called_tool_names, intent_text, parse_tool_choice, request_key
from ctxwarden.policies.tools.text import describe_tool, split_identifier, stem, terms
from tests.tools_fixtures import tool


@pytest.mark.parametrize("name, words", [
    ("searchFlights", "search Flights"), ("search_flights", "search flights"), ("PDF&URLTool", "PDF URL Tool"),
    ("getHTTPResponse", "get HTTP Response"), ("weather.v2/forecast", "weather v2 forecast"),
])
def test_identifiers_split_into_words(name, words):
    assert split_identifier(name) == words


@pytest.mark.parametrize("a, b", [
    ("flights", "flight"), ("bookings", "book"), ("booking", "book"), ("planning", "plan"), ("images", "image"),
    ("cities", "city"), ("searches", "search"), ("classes", "class"),
])
def test_inflections_meet_at_one_stem(a, b):
    assert stem(a) == stem(b)


def test_words_that_only_look_plural_keep_their_ending():
    assert stem("status") == "status" and stem("analysis") == "analysis" and stem("address") == "address"


def test_a_definition_is_described_whole_and_by_clauses():
    text = describe_tool(tool("TripTool", "Offer hotel bookings, travel planning; image editing.", ["city", "check_in"]))
    assert text.name == "TripTool"
    assert text.document == "Trip Tool: Offer hotel bookings, travel planning; image editing. Parameters: city, check in."
    assert text.segments == ("Trip Tool", "Offer hotel bookings", "travel planning", "image editing")
    assert {"trip", "hotel", "book", "city", "check"} <= set(terms(text.lexical))
    assert text.texts[0] == text.document and text.texts[1:] == list(text.segments)


def test_bm25_prefers_rare_matching_terms_and_ignores_absent_ones():
    docs = [LexicalDoc.of(describe_tool(tool(n, d, []))) for n, d in [
        ("search_flights", "Search flights between airports."),
        ("search_hotels", "Search hotels in a city."),
        ("search_web", "Search the web."),
    ]]
    scores = LexicalIndex(docs).scores(terms("search cheap flights"))
    assert scores[0] > scores[1] > 0 and scores[1] == pytest.approx(scores[2], rel=0.3)
    assert np.all(LexicalIndex(docs).scores(terms("unrelated banana")) == 0)


def test_tool_choice_forms():
    named = parse_tool_choice({"type": "function", "function": {"name": "get_weather"}})
    assert named.names == {"get_weather"} and named.required
    assert parse_tool_choice("required").required and not parse_tool_choice("auto").required
    assert parse_tool_choice("none").names == set()
    allowed = parse_tool_choice({"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": [
        {"type": "function", "function": {"name": "a"}}, {"type": "function", "name": "b"}]}})
    assert allowed.names == {"a", "b"} and allowed.required


CONVERSATION = [
    {"role": "system", "content": "You help."},
    {"role": "user", "content": "Book me a table for two tonight."},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "1", "type": "function", "function": {"name": "find_restaurants", "arguments": '{"cuisine": "thai"}'}}]},
    {"role": "tool", "tool_call_id": "1", "content": "Baan Thai has a table at 8pm."},
    {"role": "assistant", "content": "Reserving now.", "tool_calls": [
        {"id": "2", "type": "function", "function": {"name": "reserve_table", "arguments": '{"restaurant": "Baan Thai"}'}}]},
    {"role": "tool", "tool_call_id": "2", "content": "Reservation confirmed."},
]


def test_the_intent_is_the_request_plus_the_latest_turn_only():
    intent = intent_text(CONVERSATION)
    assert intent.startswith("Book me a table for two tonight.")
    assert "reserve_table" in intent and "Reservation confirmed." in intent
    assert "find_restaurants" not in intent and "Baan Thai has a table" not in intent
    assert intent_text(CONVERSATION[:2]) == "Book me a table for two tonight."


def test_the_request_key_ignores_the_agents_progress_but_not_a_new_request():
    assert request_key(CONVERSATION[:2]) == request_key(CONVERSATION)
    assert request_key(CONVERSATION + [{"role": "user", "content": "And a taxi."}]) != request_key(CONVERSATION)


def test_called_tools_are_collected_from_every_assistant_turn():
    legacy = {"role": "assistant", "content": None, "function_call": {"name": "old_style", "arguments": "{}"}}
    assert called_tool_names(CONVERSATION + [legacy]) == {"find_restaurants", "reserve_table", "old_style"}
