"""find_tools end to end: the official SDK → the real proxy → the fake upstream (scripted model).

The model calls find_tools; the proxy answers it itself and asks the upstream again with the found
tools appended, so the model calls the found tool in the same request and the client only ever
sees calls to its own tools. The client's next step forwards the same list (the found tool kept).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from ctxwarden.policies.tools.search import FIND_TOOLS
from tests.conftest import openai_client, policies_off
from tests.tools_fixtures import all_tools, names, tool

TOOLS_ONLY = {"policies": policies_off("tools")}
SYSTEM = {"role": "system", "content": "You are a helpful travel and office assistant."}
TIDE = tool("get_tide_times", "Get high and low tide times for a beach.", ["beach"])


def catalog() -> list[dict[str, Any]]:
    return all_tools(45) + [TIDE]


def create(client: Any, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
    return client.chat.completions.with_raw_response.create(model="gpt-4o", messages=messages, tools=catalog(), **kwargs)


def find_call(query: str) -> dict[str, Any]:
    return {"name": FIND_TOOLS, "arguments": json.dumps({"query": query})}


def test_a_tool_found_through_the_search_tool_is_callable_in_the_next_step(fake, start_proxy):
    proxy = start_proxy(TOOLS_ONLY)
    client = openai_client(proxy)
    turn = [SYSTEM, {"role": "user", "content": "Book me a taxi to Playa de la Concha for this afternoon."}]
    fake.reply(tool_calls=[find_call("high and low tide times at a beach")])
    fake.reply(tool_calls=[{"name": "get_tide_times", "arguments": '{"beach": "La Concha"}'}])
    raw = create(client, turn)
    first, inner = fake.chat_requests[-2:]
    assert "get_tide_times" not in names(first["tools"]) and names(first["tools"])[0] == FIND_TOOLS
    # The proxy answered find_tools and asked again: the same list, the found tool appended at its end
    # (the proxy's own tools come first, so the cached prefix holds).
    assert names(inner["tools"])[: len(first["tools"])] == names(first["tools"])
    assert "get_tide_times" in names(inner["tools"])[len(first["tools"]):]
    answer = inner["messages"][-1]
    assert answer["role"] == "tool" and "get_tide_times" in answer["content"]
    # The client sees the call to its own tool, never the search.
    message = raw.parse().choices[0].message
    assert [c.function.name for c in message.tool_calls] == ["get_tide_times"]
    actions = raw.headers["x-ctxwarden-actions"].split(",")
    assert "tools.search" in actions and "tools.recall_dropped" not in actions
    # The next step (the client ran the tool) forwards the list the inner round ended with.
    turn += [{"role": "assistant", "content": None, "tool_calls": [{"id": message.tool_calls[0].id, "type": "function",
              "function": {"name": "get_tide_times", "arguments": '{"beach": "La Concha"}'}}]},
             {"role": "tool", "tool_call_id": message.tool_calls[0].id, "content": "High tide 14:12, low tide 20:30."}]
    fake.reply(content="High tide is at 14:12; I will book the taxi for 13:30.")
    create(client, turn)
    # (the step may append its own ranked tools: the list only grows, the found tool at its place)
    assert names(fake.chat_requests[-1]["tools"])[: len(inner["tools"])] == names(inner["tools"])


def test_a_streamed_search_is_answered_in_the_proxy_too(fake, start_proxy):
    proxy = start_proxy(TOOLS_ONLY)
    fake.reply(tool_calls=[find_call("tide times")])
    fake.reply(tool_calls=[{"name": "get_tide_times", "arguments": '{"beach": "Bondi"}'}])
    stream = openai_client(proxy).chat.completions.create(
        model="gpt-4o", tools=catalog(), stream=True,
        messages=[SYSTEM, {"role": "user", "content": "Should I surf at Bondi this afternoon?"}])
    called = [tc.function.name for chunk in stream if chunk.choices for tc in chunk.choices[0].delta.tool_calls or [] if tc.function.name]
    assert called == ["get_tide_times"]
    assert "get_tide_times" in names(fake.chat_requests[-1]["tools"])



def test_a_streamed_search_round_stays_one_stream(fake, start_proxy):
    """The round the proxy answered streamed its text before its call turned out to be find_tools:
    the next round's chunks carry the same id, no second role, and its text is set apart."""
    proxy = start_proxy(TOOLS_ONLY)
    fake.reply(content="Let me look.", tool_calls=[find_call("tide times")])
    fake.reply(content="Checking the tides.", tool_calls=[{"name": "get_tide_times", "arguments": '{"beach": "Bondi"}'}])
    chunks = list(openai_client(proxy).chat.completions.create(
        model="gpt-4o", tools=catalog(), stream=True, stream_options={"include_usage": True},
        messages=[SYSTEM, {"role": "user", "content": "Should I surf at Bondi this afternoon?"}]))
    assert len(fake.chat_requests) == 2  # the proxy's round happened
    assert len({c.id for c in chunks}) == 1 and len({c.created for c in chunks}) == 1
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert [d.role for d in deltas if d.role] == ["assistant"]
    assert "".join(d.content or "" for d in deltas) == "Let me look.\n\nChecking the tides."
    assert [tc.function.name for d in deltas for tc in d.tool_calls or [] if tc.function.name] == ["get_tide_times"]
    assert chunks[-1].usage is not None and not chunks[-1].choices

def test_a_search_call_never_reaches_the_client(fake, start_proxy):
    proxy = start_proxy({"policies": {**policies_off("tools"), "tools": {"enabled": True, "max_inner_rounds": 1}}})
    client = openai_client(proxy)
    turn = [SYSTEM, {"role": "user", "content": "What will the weather be like in Paris this weekend?"}]
    # Mixed with a call to a client tool: the search is dropped, the client's call goes through.
    fake.reply(tool_calls=[find_call("weather"), {"name": "get_weather_forecast", "arguments": '{"city": "Paris"}'}])
    raw = create(client, turn)
    message = raw.parse().choices[0].message
    assert [c.function.name for c in message.tool_calls] == ["get_weather_forecast"]
    assert "tools.recall_dropped" in raw.headers["x-ctxwarden-actions"].split(",")
    # Searching again once the rounds are used up: the answer says nothing about a call at all.
    fake.reply(tool_calls=[find_call("weather")])
    fake.reply(tool_calls=[find_call("more weather")])
    raw = create(client, turn, extra_headers={"x-ctxwarden-session": "s2"})
    choice = raw.parse().choices[0]
    assert not choice.message.tool_calls and choice.finish_reason == "stop"


def test_no_search_tool_when_the_client_owns_the_name(fake, start_proxy):
    proxy = start_proxy(TOOLS_ONLY)
    own = tool(FIND_TOOLS, "Find files on the user's disk by name.", ["pattern"])
    fake.reply(tool_calls=[{"name": FIND_TOOLS, "arguments": '{"pattern": "*.pdf"}'}])
    raw = openai_client(proxy).chat.completions.with_raw_response.create(
        model="gpt-4o", tools=all_tools(45) + [own],
        messages=[SYSTEM, {"role": "user", "content": "Find my PDF files on disk, use find_tools with a pattern."}])
    sent = fake.chat_requests[-1]["tools"]
    assert [t for t in sent if t["function"]["name"] == FIND_TOOLS] in ([], [own])  # the client's own, or none
    assert "tools.search_name_taken" in raw.headers["x-ctxwarden-actions"].split(",")
    # The client's find_tools is the client's: its call is returned to the client.
    assert [c.function.name for c in raw.parse().choices[0].message.tool_calls] == [FIND_TOOLS]


def test_a_hidden_tool_the_model_calls_still_reaches_the_client(fake, start_proxy):
    proxy = start_proxy(TOOLS_ONLY)
    client = openai_client(proxy)
    turn = [SYSTEM, {"role": "user", "content": "What will the weather be like in Paris this weekend?"}]
    fake.reply(tool_calls=[{"name": "get_horoscope", "arguments": '{"sign": "leo"}'}])
    raw = create(client, turn)
    assert "get_horoscope" not in names(fake.chat_requests[-1]["tools"])
    message = raw.parse().choices[0].message
    assert [c.function.name for c in message.tool_calls] == ["get_horoscope"]
    first = names(fake.chat_requests[-1]["tools"])
    turn += [{"role": "assistant", "content": None, "tool_calls": [{"id": message.tool_calls[0].id, "type": "function",
              "function": {"name": "get_horoscope", "arguments": '{"sign": "leo"}'}}]},
             {"role": "tool", "tool_call_id": message.tool_calls[0].id, "content": "Leo: a sunny weekend."}]
    raw = create(client, turn)
    after = names(fake.chat_requests[-1]["tools"])
    # It joins after what was there (first in the appended block); find_tools stays first.
    assert after[: len(first)] == first and after[len(first)] == "get_horoscope" and after[0] == FIND_TOOLS
    assert "tools.list_changed" in raw.headers["x-ctxwarden-actions"].split(",")


@pytest.mark.parametrize("rounds", [None, 3])
def test_an_agent_that_searches_five_times_in_a_row_still_gets_its_call_through(fake, start_proxy, rounds):
    # LiveMCPBench's agents searched 4-9 times in a row before calling a tool; with 3 rounds (the old
    # default) the fourth search was dropped and the turn reached the client with no call, which an
    # agent loop takes for its final answer.
    tools = {} if rounds is None else {"max_inner_rounds": rounds}
    proxy = start_proxy({"policies": {**policies_off("tools"), "tools": {"enabled": True, **tools}}})
    client = openai_client(proxy)
    turn = [SYSTEM, {"role": "user", "content": "Is it a good afternoon to walk along the beach at La Concha?"}]
    for query in ("beach conditions", "ocean information", "sea level today", "coastal data", "high and low tide"):
        fake.reply(tool_calls=[find_call(query)])
    fake.reply(tool_calls=[{"name": "get_tide_times", "arguments": '{"beach": "La Concha"}'}])
    raw = create(client, turn)
    choice = raw.parse().choices[0]
    if rounds is None:  # the default: every search answered, then the call goes through
        assert [c.function.name for c in choice.message.tool_calls] == ["get_tide_times"]
        assert choice.finish_reason == "tool_calls" and len(fake.chat_requests) == 6
    else:
        assert not choice.message.tool_calls and len(fake.chat_requests) == rounds + 1
