"""Both adapters compare what the policies return with cheap snapshots (proxy/wire/snapshot.py),
not deep copies or JSON texts: an edit made in place, at any depth of a message or at the top of a
tool, must still be seen; an untouched conversation must still come back as the client's own."""

from __future__ import annotations

import copy

from ctxwarden.proxy.wire import anthropic as anthropic_wire
from ctxwarden.proxy.wire import responses as responses_wire
from ctxwarden.proxy.wire.snapshot import snapshot, tool_snapshot
from tests.test_wire_anthropic import agent_body
from tests.test_wire_responses import CALL_1, CALL_2, OUT_1, OUT_2, TIME, WEATHER, agent_loop, valid

# ----------------------------------------------------------------------------- snapshot


def test_snapshot_shares_only_immutable_leaves():
    text = "x" * 1000
    value = {"a": [text, {"b": 1, "c": None}], "d": (1, [2])}
    copied = snapshot(value)
    assert copied == value and copied is not value
    assert copied["a"] is not value["a"] and copied["a"][1] is not value["a"][1] and copied["a"][0] is text
    assert copied["d"][1] is not value["d"][1]  # anything that is not JSON is deep-copied
    value["a"][1]["b"] = 2
    value["a"].append("more")
    assert copied == {"a": [text, {"b": 1, "c": None}], "d": (1, [2])}


def test_tool_snapshot_copies_the_tool_and_its_function_not_the_schema():
    tool = {"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object"}}}
    copied = tool_snapshot(tool)
    assert copied == tool and copied["function"] is not tool["function"]
    assert copied["function"]["parameters"] is tool["function"]["parameters"]
    tool["function"]["description"] = "e"
    assert copied != tool


# ----------------------------------------------------------------------------- Responses


def responses_edit(edit) -> dict:
    body = agent_loop()
    parsed = responses_wire.parse_request(body)
    edit(parsed.messages, parsed.tools)
    out = valid(responses_wire.render_request(body, parsed, list(parsed.messages), list(parsed.tools)))
    assert body == agent_loop(), "render must not touch the client's body"
    return out


def test_responses_untouched_in_new_lists_is_the_client_s_own():
    out = responses_edit(lambda messages, tools: None)
    assert out == agent_loop() and out["input"] is not None
    body = agent_loop()
    parsed = responses_wire.parse_request(body)
    out = responses_wire.render_request(body, parsed, list(parsed.messages), list(parsed.tools))
    assert out["input"] is body["input"] and out["tools"] is body["tools"] and "instructions" in out


def test_responses_tool_parameters_are_the_client_s_own_object():
    body = agent_loop()
    parsed = responses_wire.parse_request(body)
    assert parsed.tools[0]["function"]["parameters"] is body["tools"][0]["parameters"]


def test_responses_in_place_content_string_edit_is_seen():
    def edit(messages, tools):
        messages[-1]["content"] += " And the day after?"
    out = responses_edit(edit)
    assert out["input"][-1] == {"type": "message", "role": "user", "content": "And tomorrow? And the day after?"}
    assert out["input"][:-1] == agent_loop()["input"][:-1]


def test_responses_in_place_instructions_edit_is_seen():
    def edit(messages, tools):
        messages[0]["content"] += " Be brief."
    out = responses_edit(edit)
    assert out["instructions"] == "You are a travel assistant. Be brief."
    assert out["input"] == agent_loop()["input"]


def test_responses_in_place_text_part_edit_is_seen():
    def edit(messages, tools):
        messages[5]["content"][0]["text"] += " Enjoy!"
    out = responses_edit(edit)
    assert out["input"][-2] == {"type": "message", "role": "assistant",
                                "content": "It is 18 °C and clear in Paris at 14:05. Enjoy!"}
    assert out["input"][:6] == agent_loop()["input"][:6]


def test_responses_in_place_part_appended_is_seen():
    def edit(messages, tools):
        messages[5]["content"].append({"type": "text", "text": " Enjoy!"})
    out = responses_edit(edit)
    assert out["input"][-2]["content"] == "It is 18 °C and clear in Paris at 14:05. Enjoy!"


def test_responses_in_place_call_arguments_edit_is_seen():
    def edit(messages, tools):
        messages[2]["tool_calls"][0]["function"]["arguments"] = "{\"city\":\"Lyon\"}"
    out = responses_edit(edit)
    calls = [item for item in out["input"] if item.get("type") == "function_call"]
    assert calls == [{"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\":\"Lyon\"}"},
                     CALL_2]
    assert OUT_1 in out["input"] and OUT_2 in out["input"] and CALL_1 not in out["input"]


def test_responses_in_place_tool_description_edit_is_seen():
    def edit(messages, tools):
        tools[0]["function"]["description"] = "Weather."
    out = responses_edit(edit)
    assert out["tools"] == [{**WEATHER, "description": "Weather."}, TIME]
    assert out["input"] == agent_loop()["input"]


def test_responses_an_equal_message_in_another_container_type_is_unchanged():
    """Compared by JSON value when == says no: a tuple where a list was is the same message."""
    body = agent_loop()
    parsed = responses_wire.parse_request(body)
    messages = copy.deepcopy(parsed.messages)
    messages[5]["content"] = tuple(messages[5]["content"])
    out = responses_wire.render_request(body, parsed, messages, parsed.tools)
    assert out["input"] is body["input"]


# ----------------------------------------------------------------------------- Messages


def messages_edit(edit) -> dict:
    body = agent_body()
    parsed = anthropic_wire.parse_request(body)
    edit(parsed.messages, parsed.tools)
    out = anthropic_wire.render_request(body, parsed, list(parsed.messages), list(parsed.tools))
    assert body == agent_body(), "render must not touch the client's body"
    return out


def test_messages_untouched_in_new_lists_is_the_client_s_own_body():
    body = agent_body()
    parsed = anthropic_wire.parse_request(body)
    assert anthropic_wire.render_request(body, parsed, list(parsed.messages), list(parsed.tools)) is body
    assert parsed.tools[0]["function"]["parameters"] is body["tools"][0]["input_schema"]


def test_messages_in_place_content_string_edit_is_seen():
    def edit(messages, tools):
        messages[1]["content"] += " and lib.py"
    out = messages_edit(edit)
    assert out["messages"][0] == {"role": "user", "content": "Fix the failing test in app.py and lib.py"}
    assert out["messages"][1:] == agent_body()["messages"][1:]


def test_messages_in_place_text_part_edit_is_seen():
    def edit(messages, tools):
        messages[-1]["content"][0]["text"] += " (GitHub Actions)"
    out = messages_edit(edit)
    original = agent_body()["messages"][-1]["content"]
    assert out["messages"][-1]["content"] == [original[0], {"type": "text", "text": original[1]["text"] + " (GitHub Actions)"},
                                              *original[2:]]


def test_messages_in_place_part_appended_is_seen():
    def edit(messages, tools):
        messages[-1]["content"].append({"type": "text", "text": "Thanks."})
    out = messages_edit(edit)
    assert out["messages"][-1]["content"] == [*agent_body()["messages"][-1]["content"], {"type": "text", "text": "Thanks."}]


def test_messages_in_place_call_arguments_edit_is_seen():
    def edit(messages, tools):
        messages[2]["tool_calls"][0]["function"]["arguments"] = "{\"path\": \"lib.py\"}"
    out = messages_edit(edit)
    blocks = out["messages"][1]["content"]
    assert blocks[:2] == agent_body()["messages"][1]["content"][:2]  # thinking and text kept
    assert blocks[2:] == [{"type": "tool_use", "id": "toolu_01", "name": "read_file", "input": {"path": "lib.py"}}]


def test_messages_in_place_tool_description_edit_is_seen():
    def edit(messages, tools):
        tools[0]["function"]["description"] = "Read one file"
    out = messages_edit(edit)
    original = agent_body()["tools"]
    assert out["tools"] == [original[1], {**original[0], "description": "Read one file"}, original[2]]
    assert out["messages"] == agent_body()["messages"]
