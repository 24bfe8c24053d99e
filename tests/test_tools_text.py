"""The tools policy's text helpers: what a definition says, what a request asks, what it forces."""

from __future__ import annotations

import numpy as np
import pytest

from ctxwarden.policies.tools.loadout import extend
from ctxwarden.policies.tools.query import QueryWeights, agent_query, weighted_terms
from ctxwarden.policies.tools.ranking import LexicalDoc, LexicalIndex
from ctxwarden.policies.tools.search import parse_query, summary
from ctxwarden.policies.tools.selection import adaptive_relevant, called_tool_names, parse_tool_choice, request_key
from ctxwarden.policies.tools.servers import NO_SERVER, explicit_server, focus, server_groups, sibling_boost
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


def test_the_query_is_the_request_the_task_and_the_latest_step_weighted():
    parts = {p.kind: p for p in agent_query(CONVERSATION, QueryWeights())}
    assert set(parts) == {"request", "assistant", "result"}  # one user message: it is the request and the task
    assert parts["request"].text == "Book me a table for two tonight."
    assert "Reserving now." in parts["assistant"].text and "reserve_table" in parts["assistant"].text
    assert "Baan Thai" in parts["assistant"].text  # the call's arguments
    assert parts["result"].text == "Reservation confirmed."
    assert "find_restaurants" not in parts["assistant"].text  # only the latest step
    later = CONVERSATION + [{"role": "assistant", "content": "Done."}, {"role": "user", "content": "And a taxi there."}]
    parts = {p.kind: p for p in agent_query(later, QueryWeights(task=0.3))}
    assert parts["request"].text == "And a taxi there." and parts["task"].text == "Book me a table for two tonight."
    assert "assistant" not in parts  # nothing after the new request yet
    assert {p.kind for p in agent_query(CONVERSATION, QueryWeights(assistant=0, result=0))} == {"request"}


def test_weighted_terms_keep_the_heaviest_part_of_each_term():
    parts = agent_query(CONVERSATION, QueryWeights(request=1.0, assistant=0.5, result=0.2))
    weights = weighted_terms(parts)
    assert weights["book"] == 1.0 and weights["reserv"] == 0.5 and weights["confirm"] == 0.2


def test_weighted_bm25_scales_each_terms_contribution():
    docs = [LexicalDoc.of(describe_tool(tool(n, d, []))) for n, d in [
        ("search_flights", "Search flights."), ("search_hotels", "Search hotels."), ("search_web", "Search the web.")]]
    index = LexicalIndex(docs)
    full = index.scores({"flight": 1.0, "hotel": 1.0})
    half = index.scores({"flight": 1.0, "hotel": 0.5})
    assert full[0] == pytest.approx(half[0]) and half[1] == pytest.approx(full[1] / 2)


def test_parameter_names_and_enum_values_are_lexical_terms():
    weather = tool("get_weather", "Current conditions.", ["city"])
    weather["function"]["parameters"]["properties"]["unit"] = {"type": "string", "enum": ["celsius", "fahrenheit"]}
    weather["function"]["parameters"]["properties"]["opts"] = {"type": "object", "properties": {
        "detail": {"type": "string", "enum": ["hourly", "daily"]}}}
    lexical = set(terms(describe_tool(weather).lexical))
    assert {"city", "unit", "celsius", "fahrenheit", "hourly", "daily"} <= lexical
    weather["function"]["parameters"]["properties"]["unit"]["enum"] = "celsius"  # not a list: ignored, no crash
    assert "celsius" not in set(terms(describe_tool(weather).lexical))


@pytest.mark.parametrize("name, server", [
    ("github__create_issue", "github"), ("mcp__github__create_issue", "mcp__github"), ("weather.forecast", "weather"),
    ("fs/read_file", "fs"), ("slack:post", "slack"), ("search_flights", None), ("__init", None),
])
def test_mcp_style_names_name_their_server(name, server):
    assert explicit_server(name) == server


def test_servers_come_from_separators_and_shared_prefixes_not_from_verbs():
    names = ["github__create_issue", "github__list_prs", "Movies_1_FindMovies", "Movies_1_BuyTickets",
             "slack_post_message", "slack_list_channels", "search_flights", "search_hotels", "lonely_prefix_tool", None]
    groups, servers = server_groups(names)
    by_name = {n: servers[g] if g != NO_SERVER else None for n, g in zip(names, groups)}
    assert by_name["github__list_prs"] == "github" and by_name["Movies_1_BuyTickets"] == "movies_1"
    assert by_name["slack_post_message"] == by_name["slack_list_channels"] == "slack"
    assert by_name["search_flights"] is None and by_name["search_hotels"] is None  # two words: a verb and an object
    assert by_name["lonely_prefix_tool"] is None and by_name[None] is None  # a prefix nobody shares


def test_a_prefix_most_of_a_large_catalog_shares_is_a_habit_not_a_server():
    names = [f"get_thing_{i}" for i in range(15)] + [f"jira_other_{i}" for i in range(4)] + [f"tool{i}" for i in range(6)]
    groups, _ = server_groups(names)
    assert all(g == NO_SERVER for g in groups[:15]) and all(g != NO_SERVER for g in groups[15:19])


def test_siblings_of_an_anchor_rank_up_by_their_own_relevance():
    scores = np.array([0.6, 0.4, 0.0, 0.5])
    groups = np.array([0, 0, 0, 1])
    boosted = sibling_boost(scores, groups, anchors=[0], boost=0.5)
    assert boosted[1] == pytest.approx(0.6) and boosted[2] == 0.0 and boosted[3] == 0.5
    assert np.array_equal(sibling_boost(scores, groups, anchors=[0], boost=0), scores)
    assert np.array_equal(sibling_boost(scores, np.full(4, NO_SERVER), anchors=[0], boost=0.5), scores)


def test_past_the_first_few_only_the_servers_in_play_are_kept():
    groups = np.array([0, 1, 2, 0, 1, NO_SERVER, 0])
    chosen = [0, 1, 2, 3, 4, 5, 6]  # best first
    assert focus(chosen, groups, anchors=[], keep=2) == [0, 1, 3, 6]  # the best tool's server past the first two
    assert focus(chosen, groups, anchors=[4], keep=2) == [0, 1, 3, 4, 6]  # and an anchor's (called or forwarded)
    assert focus(chosen, groups, anchors=[], keep=0) == chosen  # off
    assert focus([5, 0, 1, 2], groups, anchors=[], keep=1) == [5, 0, 1, 2]  # no server behind the best: nothing to go by
    assert focus([], groups, anchors=[], keep=2) == []


def test_adaptive_k_keeps_tools_within_the_gap_between_min_k_and_max_k():
    one_clear = np.array([0.9, 0.5, 0.45, 0.4, 0.1])
    assert adaptive_relevant(one_clear, 2, 4, 0.1, 0.0) == [0, 1]  # min_k, then the gap stops it
    several = np.array([0.62, 0.6, 0.58, 0.57, 0.55, 0.1])
    assert adaptive_relevant(several, 2, 4, 0.1, 0.0) == [0, 1, 2, 3]  # max_k caps it
    assert adaptive_relevant(several, 2, 8, 0.1, 0.0) == [0, 1, 2, 3, 4]
    assert adaptive_relevant(several, 2, 8, 0.1, 0.59) == [0, 1]  # the floor wins over min_k
    assert adaptive_relevant(np.array([]), 2, 4, 0.1, 0.0) == []


def test_the_list_only_grows_and_drops_only_what_the_client_stopped_sending():
    names, added, removed = extend(["a", "b", "c"], ["d", "a", "e", "d"], {"a", "c", "d", "e"})
    assert names == ["a", "c", "d", "e"] and added == ["d", "e"] and removed == ["b"]
    assert extend([], ["x"], {"y"}) == ([], [], [])


@pytest.mark.parametrize("raw, query", [
    ('{"query": "  press the brake pedal "}', "press the brake pedal"), ('{"query": ""}', None), ("not json", None),
    ('["query"]', None), ('{"query": 5}', None), ("", None),
])
def test_find_tools_arguments(raw, query):
    assert parse_query(raw) == query


def test_a_summary_is_one_short_line():
    assert summary("Get the\nweather   forecast.") == "Get the weather forecast."
    long = summary("word " * 100)
    assert len(long) <= 141 and long.endswith("…") and "\n" not in long


def test_the_request_key_ignores_the_agents_progress_but_not_a_new_request():
    assert request_key(CONVERSATION[:2]) == request_key(CONVERSATION)
    assert request_key(CONVERSATION + [{"role": "user", "content": "And a taxi."}]) != request_key(CONVERSATION)


def test_called_tools_are_collected_from_every_assistant_turn():
    legacy = {"role": "assistant", "content": None, "function_call": {"name": "old_style", "arguments": "{}"}}
    assert called_tool_names(CONVERSATION + [legacy]) == {"find_restaurants", "reserve_table", "old_style"}
