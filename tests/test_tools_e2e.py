"""The tools policy end to end: the official SDK → the real proxy → the fake upstream.

What the upstream receives is what counts: how many tools, which ones, in which order, and that
each is the client's own definition. The embedder is the proxy's real (offline) one, wrapped to
count what it is asked to embed; the catalog is a real Chroma store under tmp_path.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from ctxwarden.policies.tools.config import ToolsConfig
from ctxwarden.policies.tools.search import FIND_TOOLS
from ctxwarden.policies.tools.text import describe_tool
from tests.conftest import openai_client, policies_off
from tests.tools_fixtures import CLEAR_QUERIES, CountingEmbedder, all_tools, names, tool

TOOLS_ONLY = {"policies": policies_off("tools")}
MAX_K = ToolsConfig().max_k
SYSTEM = {"role": "system", "content": "You are a helpful travel and office assistant."}


def ask(client: Any, content: str | list[dict[str, Any]], tools: list[dict[str, Any]], **kwargs: Any) -> Any:
    messages = [SYSTEM, {"role": "user", "content": content}] if isinstance(content, str) else content
    return client.chat.completions.with_raw_response.create(model="gpt-4o", messages=messages, tools=tools, **kwargs)


def client_names(tools: list[dict[str, Any]] | None) -> list[str]:
    """The forwarded tools without the proxy's own (find_tools), which the client never sent."""
    return [n for n in names(tools) if n != FIND_TOOLS]


def counting(proxy: Any) -> CountingEmbedder:
    services = proxy.app.state.services
    services.embedder = CountingEmbedder(services.embedder)
    return services.embedder


def test_45_tools_become_at_most_max_k_and_include_the_right_one(fake, start_proxy):
    proxy = start_proxy(TOOLS_ONLY)
    client = openai_client(proxy)
    tools = all_tools(45)
    for i, (query, right) in enumerate(CLEAR_QUERIES):
        raw = ask(client, query, tools, extra_headers={"x-ctxwarden-session": f"s{i}"})
        forwarded = names(fake.chat_requests[-1]["tools"])
        assert 1 <= len(forwarded) - 1 <= MAX_K, (query, forwarded)
        assert right in forwarded, (query, forwarded)
        assert forwarded[0] == FIND_TOOLS  # the proxy's tool comes first: the client's list grows at its end
        actions = raw.headers["x-ctxwarden-actions"].split(",")
        assert "tools.confusion" in actions and "tools.filter" in actions
    telemetry = proxy.app.state.telemetry
    assert telemetry.value("ctxwarden.tools.confusion") == len(CLEAR_QUERIES)
    assert telemetry.value("ctxwarden.tools.saved_tokens") == len(CLEAR_QUERIES)  # one point per request


def test_streamed_requests_are_filtered_too(fake, start_proxy):
    proxy = start_proxy(TOOLS_ONLY)
    stream = openai_client(proxy).chat.completions.create(
        model="gpt-4o", messages=[SYSTEM, {"role": "user", "content": CLEAR_QUERIES[0][0]}], tools=all_tools(45), stream=True
    )
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    forwarded = client_names(fake.chat_requests[-1]["tools"])
    assert len(forwarded) <= MAX_K and CLEAR_QUERIES[0][1] in forwarded


def test_kept_definitions_are_the_clients_bytes_in_the_clients_order(fake, start_proxy):
    proxy = start_proxy(TOOLS_ONLY)
    tools = all_tools(45)
    # Unusual shapes must survive untouched: key order, unicode, strict mode, numbers, extra fields.
    tools[5] = {"function": {"parameters": {"properties": {"city": {"type": "string", "description": "Ciudad, e.g. Málaga ☀"},
                                                       "days": {"type": "integer", "maximum": 16, "default": 3.0}},
                                        "type": "object", "required": ["city"], "additionalProperties": False},
                             "strict": True, "name": "get_weather_forecast",
                             "description": "Get the weather forecast (temperature, rain, wind) for a city — prévisions météo."},
                "type": "function", "x_vendor": {"cache": None}}
    ask(openai_client(proxy), "Will it rain in Málaga tomorrow? I need the weather forecast.", tools)
    sent = [t for t in fake.chat_requests[-1]["tools"] if t["function"]["name"] != FIND_TOOLS]
    raw = fake.received[-1].raw.decode("utf-8")
    assert "get_weather_forecast" in names(sent) and len(sent) <= MAX_K
    by_name = {t["function"]["name"]: t for t in tools}
    for forwarded in sent:
        original = by_name[forwarded["function"]["name"]]
        assert json.dumps(forwarded, ensure_ascii=False) == json.dumps(original, ensure_ascii=False)  # key order too
        assert json.dumps(original, ensure_ascii=False, separators=(",", ":")) in raw
    order = [names(tools).index(n) for n in names(sent)]
    assert order == sorted(order)


def test_a_forced_tool_choice_is_kept(fake, start_proxy):
    proxy = start_proxy(TOOLS_ONLY)
    choice = {"type": "function", "function": {"name": "delete_calendar_event"}}
    ask(openai_client(proxy), CLEAR_QUERIES[0][0], all_tools(45), tool_choice=choice)
    sent = fake.chat_requests[-1]
    assert "delete_calendar_event" in names(sent["tools"])
    assert CLEAR_QUERIES[0][1] in names(sent["tools"])
    assert sent["tool_choice"] == choice


def test_required_tool_choice_never_forwards_an_empty_list(fake, start_proxy):
    proxy = start_proxy({"policies": {**policies_off("tools"), "tools": {"enabled": True, "min_score": 5.0}}})
    ask(openai_client(proxy), CLEAR_QUERIES[1][0], all_tools(45), tool_choice="required")
    sent = fake.chat_requests[-1]
    assert client_names(sent["tools"]) == [CLEAR_QUERIES[1][1]]  # nothing reaches 5.0: the best one is kept
    assert sent["tool_choice"] == "required"
    # Without "required", a floor nothing reaches leaves no client tool: the model can still search.
    ask(openai_client(proxy), CLEAR_QUERIES[1][0], all_tools(45), tool_choice="auto", extra_headers={"x-ctxwarden-session": "s2"})
    sent = fake.chat_requests[-1]
    assert names(sent["tools"]) == [FIND_TOOLS] and sent["tool_choice"] == "auto"
    # Without the search tool nothing is left, and tool_choice goes with the tools.
    proxy = start_proxy({"policies": {**policies_off("tools"), "tools": {"enabled": True, "min_score": 5.0, "search_tool": False}}})
    ask(openai_client(proxy), CLEAR_QUERIES[1][0], all_tools(45), tool_choice="auto")
    sent = fake.chat_requests[-1]
    assert "tools" not in sent and "tool_choice" not in sent


def test_a_tool_called_earlier_is_kept_while_its_call_is_in_context(fake, start_proxy):
    proxy = start_proxy(TOOLS_ONLY)
    conversation = [
        SYSTEM,
        {"role": "user", "content": "Please translate my note to German: the meeting moved to Monday."},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
            "name": "translate_text", "arguments": '{"text": "the meeting moved to Monday", "target_language": "de"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "Das Treffen wurde auf Montag verschoben."},
        {"role": "assistant", "content": "Das Treffen wurde auf Montag verschoben."},
        {"role": "user", "content": "Thanks! Now, how much is 300 pounds in Japanese yen?"},
    ]
    ask(openai_client(proxy), conversation, all_tools(45))
    sent = fake.chat_requests[-1]
    assert "translate_text" in names(sent["tools"])
    assert "convert_currency" in names(sent["tools"])
    assert sent["messages"] == conversation


def test_the_forwarded_list_is_append_only_within_a_session(fake, start_proxy):
    proxy = start_proxy(TOOLS_ONLY)
    client = openai_client(proxy)
    tools = all_tools(45)
    turn = [SYSTEM, {"role": "user", "content": "Plan my trip: a flight from Madrid to Berlin on Friday, then a hotel there."}]
    ask(client, turn, tools)
    first = client_names(fake.chat_requests[-1]["tools"])
    assert first == [n for n in names(tools) if n in first]  # the first list is in the client's order
    called = first[0]
    turn += [
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
            "name": called, "arguments": '{"origin": "MAD", "destination": "BER", "date": "2025-06-06"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "IB3662 08:05 €89; LH1123 12:40 €132."},
    ]
    ask(client, turn, tools)
    lists = [first, client_names(fake.chat_requests[-1]["tools"])]
    # A tool the model called that the proxy had hidden (it still reached the client) joins the list after what
    # was there, first in the appended block (this step's ranked tools the list lacked join the same change).
    outside = next(n for n in names(tools) if n not in lists[-1] and n not in ("get_horoscope", "define_word"))
    turn += [
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c2", "type": "function", "function": {
            "name": outside, "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c2", "content": "done"},
    ]
    raw = ask(client, turn, tools)
    lists.append(client_names(fake.chat_requests[-1]["tools"]))
    assert lists[-1][len(lists[-2])] == outside and "tools.list_changed" in raw.headers["x-ctxwarden-actions"]
    # New user requests add what they need after what is there; nothing moves, nothing goes.
    for i, request in enumerate(["What is my horoscope today? I am a Leo.", "Define the word 'serendipity'."]):
        turn += [{"role": "assistant", "content": "Done."}, {"role": "user", "content": request}]
        ask(client, turn, tools)
        lists.append(client_names(fake.chat_requests[-1]["tools"]))
    assert "get_horoscope" in lists[-2] and "define_word" in lists[-1]
    for before, after in zip(lists, lists[1:]):
        assert after[: len(before)] == before, (before, after)
    # Another session starts from its own list.
    ask(client, [SYSTEM, {"role": "user", "content": "What is my horoscope today? I am a Leo."}], tools,
        extra_headers={"x-ctxwarden-session": "other"})
    other = client_names(fake.chat_requests[-1]["tools"])
    assert "get_horoscope" in other and outside not in other and len(other) < len(lists[-1])


def test_at_or_below_max_tools_the_body_is_forwarded_byte_for_byte(fake, start_proxy):
    proxy = start_proxy(TOOLS_ONLY)
    sent_bodies: list[bytes] = []
    http = httpx.Client(event_hooks={"request": [lambda r: sent_bodies.append(r.read())]})
    client = openai_client(proxy, http_client=http)
    raw = ask(client, CLEAR_QUERIES[0][0], all_tools(30))
    assert fake.received[-1].raw == sent_bodies[-1]
    assert len(fake.chat_requests[-1]["tools"]) == 30
    assert raw.headers["x-ctxwarden-actions"] == ""


def test_a_second_request_with_the_same_tools_embeds_only_the_query(fake, start_proxy, tmp_path):
    proxy = start_proxy(TOOLS_ONLY)
    embedder = counting(proxy)
    client = openai_client(proxy)
    tools = all_tools(45)
    raw = ask(client, CLEAR_QUERIES[0][0], tools)
    assert "tools.catalog_add" in raw.headers["x-ctxwarden-actions"]
    first = embedder.texts
    assert first > 45  # every definition (and its segments) once, plus the query
    raw = ask(client, CLEAR_QUERIES[1][0], tools)
    assert embedder.calls[-1] == [CLEAR_QUERIES[1][0]] and embedder.texts == first + 1
    assert "tools.catalog_add" not in raw.headers["x-ctxwarden-actions"]
    # A different mix of known tools (a subset, reordered, one new tool) embeds only the new one.
    tide = tool("get_tide_times", "Get high and low tide times for a beach.", ["beach"])
    before = len(embedder.calls)
    ask(client, CLEAR_QUERIES[2][0], list(reversed(tools[:40])) + [tide])
    assert embedder.calls[before:] == [describe_tool(tide).texts, [CLEAR_QUERIES[2][0]]]


def test_the_catalog_survives_a_restart_in_chroma(fake, start_proxy):
    first = start_proxy(TOOLS_ONLY)
    ask(openai_client(first), CLEAR_QUERIES[0][0], all_tools(45))
    first.stop()
    second = start_proxy(TOOLS_ONLY)  # same storage path, fresh process state
    embedder = counting(second)
    raw = ask(openai_client(second), CLEAR_QUERIES[3][0], all_tools(45))
    assert embedder.calls == [[CLEAR_QUERIES[3][0]]]
    assert CLEAR_QUERIES[3][1] in names(fake.chat_requests[-1]["tools"])
    assert "tools.catalog_add" not in raw.headers["x-ctxwarden-actions"]
