"""The Responses API adapter (proxy/wire/responses*.py): parse → policies' chat form → render.

Unchanged conversations must come back byte for byte; edits must change only what they touch;
the proxy's own answers must be what the openai SDK parses.
"""

from __future__ import annotations

import copy
import json

import pytest
from openai import omit
from openai.lib.streaming.responses import ResponseStreamState
from openai.types.responses import Response, ResponseInputParam, ResponseStreamEvent
from pydantic import TypeAdapter

from ctxwarden.policies.messages import append_note, content_text, group_exchanges
from ctxwarden.proxy.wire.responses import (
    UNCHANGED,
    InvalidRequest,
    answer_text,
    calls_in_answer,
    parse_request,
    proxy_response,
    proxy_stream_events,
    render_request,
    render_tools,
    replace_answer,
)

WEATHER = {"type": "function", "name": "get_weather", "description": "Weather for a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
           "strict": True}
TIME = {"type": "function", "name": "get_time", "description": "Local time.",
        "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}}, "strict": False}
WEB = {"type": "web_search_preview", "search_context_size": "medium"}
FILES = {"type": "file_search", "vector_store_ids": ["vs_1"], "max_num_results": 4}
MCP = {"type": "mcp", "server_label": "deepwiki", "server_url": "https://mcp.deepwiki.com/mcp", "require_approval": "never"}

REASONING_1 = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "SECRET-THOUGHT one"}],
               "encrypted_content": "gAAAAB-one"}
REASONING_2 = {"id": "rs_2", "type": "reasoning", "summary": [], "encrypted_content": "gAAAAB-two"}
CALL_1 = {"arguments": "{\"city\":\"Paris\"}", "call_id": "call_1", "name": "get_weather", "type": "function_call",
          "id": "fc_1", "status": "completed"}
CALL_2 = {"type": "function_call", "id": "fc_2", "call_id": "call_2", "name": "get_time", "arguments": "{\"tz\":\"CET\"}",
          "status": "completed"}
OUT_1 = {"type": "function_call_output", "call_id": "call_1", "output": "{\"temp_c\": 18, \"sky\": \"clear\"}"}
OUT_2 = {"call_id": "call_2", "output": "14:05", "type": "function_call_output"}
ANSWER = {"id": "msg_a1", "type": "message", "status": "completed", "role": "assistant",
          "content": [{"type": "output_text", "text": "It is 18 °C and clear in Paris at 14:05.", "annotations": [],
                       "logprobs": []}]}


def agent_loop() -> dict:
    """What openai-agents sends on its third turn: history items replayed, reasoning included."""
    return {
        "model": "o4-mini", "instructions": "You are a travel assistant.",
        "input": [
            {"content": "Weather and time in Paris?", "role": "user"},
            REASONING_1, CALL_1, CALL_2, OUT_1, OUT_2,
            REASONING_2, ANSWER,
            {"role": "user", "content": "And tomorrow?"},
        ],
        "tools": [WEATHER, TIME], "tool_choice": "auto", "parallel_tool_calls": True, "store": False,
        "include": ["reasoning.encrypted_content"], "reasoning": {"effort": "medium", "summary": "auto"},
        "stream": True, "truncation": "disabled",
    }


BODIES = {
    "string": {"model": "gpt-4.1", "input": "Tell me a joke about élan.", "temperature": 0.2},
    "string_instructions": {"instructions": "Be brief.", "model": "gpt-4.1", "input": "Hi", "metadata": {"k": "v"}},
    "agent_loop": agent_loop(),
    "images": {
        "model": "gpt-4o",
        "input": [{"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "What is in these?"},
            {"type": "input_image", "image_url": "https://example.com/cat.png", "detail": "high"},
            {"type": "input_image", "file_id": "file-img", "detail": "auto"},
            {"type": "input_file", "file_id": "file-pdf"},
            {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo=", "detail": "low"}]}],
    },
    "previous_response": {
        "model": "gpt-4o", "previous_response_id": "resp_abc", "store": True,
        "input": [{"type": "item_reference", "id": "msg_old"}, {"id": "fc_old"},
                  {"type": "function_call_output", "call_id": "call_old", "output": "done"},
                  {"role": "user", "content": [{"type": "input_text", "text": "Next step?"}]}],
        "text": {"format": {"type": "json_schema", "name": "step", "schema": {"type": "object"}, "strict": True}},
    },
    "hosted_tools": {
        "model": "gpt-4.1", "input": [{"role": "developer", "content": "Cite sources."},
                                      {"role": "user", "content": "Latest Rust release?"}],
        "tools": [WEB, WEATHER, FILES, MCP, TIME], "tool_choice": {"type": "function", "name": "get_weather"},
    },
    "interleaved": {
        "model": "gpt-4o-mini", "input": [
            {"role": "system", "content": "sys"}, {"role": "user", "content": "go"},
            {"role": "assistant", "content": "Checking."}, CALL_1, OUT_1, CALL_2, OUT_2,
            {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "q"}},
            ANSWER, REASONING_2],
        "tools": [WEATHER, TIME, WEB],
        "tool_choice": {"type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": "get_time"},
                                                                            {"type": "web_search_preview"}]},
    },
    "list_output": {
        "model": "gpt-4o", "input": [
            {"role": "user", "content": "Screenshot?"}, {"type": "function_call", "call_id": "c9", "name": "shot",
                                                         "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c9", "output": [
                {"type": "input_text", "text": "here"}, {"type": "input_image", "image_url": "https://x/y.png",
                                                          "detail": "auto"}]}],
    },
    "only_riders": {"model": "computer-use-preview", "previous_response_id": "resp_9", "truncation": "auto",
                    "input": [{"type": "computer_call_output", "call_id": "cu_1",
                               "output": {"type": "computer_screenshot", "image_url": "data:image/png;base64,AA"}}],
                    "tools": [{"type": "computer_use_preview", "display_width": 1024, "display_height": 768,
                               "environment": "browser"}]},
    "no_input": {"model": "gpt-4o", "previous_response_id": "resp_1", "instructions": "again"},
}


INPUT = TypeAdapter(ResponseInputParam)


def dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


def valid(body: dict) -> dict:
    """`body`, after checking that its `input` has the shape of the openai SDK's input items."""
    if isinstance(body.get("input"), list):
        INPUT.validate_python(body["input"])
    return body


@pytest.mark.parametrize("name", sorted(BODIES))
def test_unchanged_conversation_renders_byte_identical(name):
    body = copy.deepcopy(BODIES[name])
    before = dumps(body)
    parsed = parse_request(body)
    assert dumps(render_request(body, parsed, parsed.messages, parsed.tools)) == before
    # Equal but new dicts (a policy that rebuilt the list) render the same bytes too.
    again = render_request(body, parsed, copy.deepcopy(parsed.messages), copy.deepcopy(parsed.tools),
                           tool_choice=copy.deepcopy(parsed.tool_choice))
    assert dumps(again) == before
    assert dumps(body) == before  # parse and render never touch the client's body


@pytest.mark.parametrize("name", sorted(BODIES))
def test_policies_mutating_messages_in_place_do_not_reach_the_originals(name):
    body = copy.deepcopy(BODIES[name])
    before = dumps(body)
    parsed = parse_request(body)
    for message in parsed.messages:
        if isinstance(message.get("content"), list):
            for part in message["content"]:
                if isinstance(part, dict):
                    part["touched"] = True
    render_request(body, parsed, parsed.messages, parsed.tools)
    assert dumps(body) == before


def test_agent_loop_parses_to_chat_messages():
    parsed = parse_request(agent_loop())
    assert parsed.instructions
    assert parsed.messages == [
        {"role": "system", "content": "You are a travel assistant."},
        {"role": "user", "content": "Weather and time in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
            {"id": "call_2", "type": "function", "function": {"name": "get_time", "arguments": "{\"tz\":\"CET\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp_c\": 18, \"sky\": \"clear\"}"},
        {"role": "tool", "tool_call_id": "call_2", "content": "14:05"},
        {"role": "assistant", "content": [{"type": "text", "text": "It is 18 °C and clear in Paris at 14:05."}]},
        {"role": "user", "content": "And tomorrow?"},
    ]
    assert group_exchanges(parsed.messages) == [[0], [1], [2, 3, 4], [5], [6]]
    assert parsed.tools == [
        {"type": "function", "function": {k: WEATHER[k] for k in ("name", "description", "parameters", "strict")}},
        {"type": "function", "function": {k: TIME[k] for k in ("name", "description", "parameters", "strict")}}]
    assert parsed.tool_choice == "auto"


def test_reasoning_is_never_shown_to_policies():
    parsed = parse_request(agent_loop())
    shown = dumps(parsed.messages) + "".join(content_text(m) for m in parsed.messages)
    assert "SECRET-THOUGHT" not in shown and "gAAAAB" not in shown and "rs_" not in shown


def test_an_assistant_message_carries_the_function_calls_after_it():
    parsed = parse_request(BODIES["interleaved"])
    assert [m["role"] for m in parsed.messages] == ["system", "user", "assistant", "tool", "assistant", "tool",
                                                    "assistant"]
    assert parsed.messages[2]["content"] == "Checking."
    assert [c["id"] for c in parsed.messages[2]["tool_calls"]] == ["call_1"]
    assert [c["id"] for c in parsed.messages[4]["tool_calls"]] == ["call_2"]
    assert not parsed.instructions  # a system item stays an item
    assert parsed.tool_choice == {"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": [
        {"type": "function", "function": {"name": "get_time"}}, {"type": "web_search_preview"}]}}


def test_content_parts_become_chat_parts_and_opaque_parts_stay():
    parsed = parse_request(BODIES["images"])
    assert parsed.messages == [{"role": "user", "content": [
        {"type": "text", "text": "What is in these?"},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png", "detail": "high"}},
        {"type": "input_image", "file_id": "file-img", "detail": "auto"},
        {"type": "input_file", "file_id": "file-pdf"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=", "detail": "low"}}]}]
    tool = parse_request(BODIES["list_output"]).messages[2]
    assert tool == {"role": "tool", "tool_call_id": "c9", "content": [
        {"type": "text", "text": "here"}, {"type": "image_url", "image_url": {"url": "https://x/y.png", "detail": "auto"}}]}


def test_item_references_and_unknown_items_ride_with_the_next_message():
    body = BODIES["previous_response"]
    parsed = parse_request(body)
    assert parsed.messages == [{"role": "tool", "tool_call_id": "call_old", "content": "done"},
                               {"role": "user", "content": [{"type": "text", "text": "Next step?"}]}]
    assert parsed.sources == [[0, 1, 2], [3]]


def test_an_edited_user_message_changes_only_itself():
    body = agent_loop()
    parsed = parse_request(body)
    messages = append_note(parsed.messages, "[ctxwarden] note")
    out = valid(render_request(body, parsed, messages, parsed.tools))
    assert out["input"][:-1] == body["input"][:-1]
    assert all(a is b for a, b in zip(out["input"][:-1], body["input"][:-1]))
    assert out["input"][-1] == {"type": "message", "role": "user", "content": "And tomorrow?\n\n[ctxwarden] note"}
    assert {k: v for k, v in out.items() if k != "input"} == {k: v for k, v in body.items() if k != "input"}
    assert parse_request(out).messages == messages


def test_an_edited_list_message_keeps_its_original_parts():
    body = BODIES["images"]
    parsed = parse_request(body)
    messages = append_note(parsed.messages, "note")
    [item] = render_request(body, parsed, messages, parsed.tools)["input"]
    original = body["input"][0]["content"]
    assert all(a is b for a, b in zip(item["content"], original))
    assert item["content"][len(original):] == [{"type": "input_text", "text": "note"}]
    assert item["role"] == "user" and item["type"] == "message"


def test_a_note_after_tool_results_is_a_new_user_item():
    body = BODIES["list_output"]
    parsed = parse_request(body)
    out = valid(render_request(body, parsed, append_note(parsed.messages, "note"), None))
    assert out["input"][:3] == body["input"] and out["input"][3] == {"type": "message", "role": "user", "content": "note"}


def test_dropping_an_exchange_drops_its_calls_results_and_reasoning():
    body = agent_loop()
    parsed = parse_request(body)
    kept = parsed.messages[:2] + parsed.messages[5:]
    out = valid(render_request(body, parsed, kept, parsed.tools))
    assert out["input"] == [body["input"][0], REASONING_2, ANSWER, body["input"][-1]]
    assert "rs_1" not in dumps(out) and "call_1" not in dumps(out)
    assert parse_request(out).messages == kept


def test_a_summary_replacing_history_renders_as_a_user_item():
    body = agent_loop()
    parsed = parse_request(body)
    summary = {"role": "user", "content": "[summary] The user asked about Paris: 18 °C, 14:05."}
    messages = [parsed.messages[0], summary, parsed.messages[-1]]
    out = valid(render_request(body, parsed, messages, parsed.tools))
    assert out["input"] == [{"type": "message", "role": "user", "content": summary["content"]}, body["input"][-1]]
    assert out["input"][1] is body["input"][-1]
    assert out["instructions"] == body["instructions"]


def test_a_rewritten_answer_loses_its_reasoning_but_kept_calls_keep_theirs():
    body = {"model": "o3", "input": [{"role": "user", "content": "q"}, REASONING_2, ANSWER]}
    parsed = parse_request(body)
    messages = [parsed.messages[0], {"role": "assistant", "content": "shorter"}]
    assert render_request(body, parsed, messages, None)["input"] == [
        body["input"][0], {"type": "message", "role": "assistant", "content": "shorter"}]
    body = {"model": "o3", "input": [{"role": "assistant", "content": "Checking."}, REASONING_1, CALL_1, OUT_1]}
    parsed = parse_request(body)
    edited = {**parsed.messages[0], "content": "Checking now."}
    out = render_request(body, parsed, [edited, parsed.messages[1]], None)["input"]
    assert out == [{"type": "message", "role": "assistant", "content": "Checking now."}, REASONING_1, CALL_1, OUT_1]
    assert out[1] is REASONING_1 and out[2] is CALL_1


def test_a_reasoning_item_stays_with_the_hosted_call_after_it():
    search = {"type": "web_search_call", "id": "ws_7", "status": "completed", "action": {"type": "search", "query": "q"}}
    body = {"model": "o3", "input": [{"role": "user", "content": "q"}, REASONING_1, search, REASONING_2, ANSWER]}
    parsed = parse_request(body)
    assert parsed.sources == [[0], [1, 2, 3, 4]]
    messages = [parsed.messages[0], {"role": "assistant", "content": "shorter"}]
    out = valid(render_request(body, parsed, messages, None))["input"]
    assert out == [body["input"][0], REASONING_1, search, {"type": "message", "role": "assistant", "content": "shorter"}]


def test_a_changed_tool_result_keeps_the_other_items():
    body = agent_loop()
    parsed = parse_request(body)
    messages = copy.deepcopy(parsed.messages)
    messages[3]["content"] = "[archived: ref ab12] temp 18"
    out = valid(render_request(body, parsed, messages, parsed.tools))
    assert out["input"][4] == {"type": "function_call_output", "call_id": "call_1", "output": "[archived: ref ab12] temp 18"}
    assert [i for n, i in enumerate(out["input"]) if n != 4] == [i for n, i in enumerate(body["input"]) if n != 4]
    assert parse_request(out).messages == messages


def test_an_edited_assistant_text_is_a_plain_string_message():
    body = {"model": "gpt-4o", "input": [{"role": "user", "content": "q"}, ANSWER, {"role": "user", "content": "more"}]}
    parsed = parse_request(body)
    messages = copy.deepcopy(parsed.messages)
    messages[1]["content"].append({"type": "text", "text": " (rounded)"})
    out = valid(render_request(body, parsed, messages, None))
    assert out["input"][1] == {"type": "message", "role": "assistant",
                               "content": "It is 18 °C and clear in Paris at 14:05. (rounded)"}
    assert out["input"][0] is body["input"][0] and out["input"][2] is body["input"][2]


def test_changed_calls_are_rewritten_and_the_rest_reused():
    body = agent_loop()
    parsed = parse_request(body)
    messages = copy.deepcopy(parsed.messages)
    messages[2]["tool_calls"][1]["function"]["arguments"] = "{\"tz\":\"UTC\"}"
    out = render_request(body, parsed, messages, parsed.tools)["input"]
    assert out[1:3] == [REASONING_1, CALL_1] and out[2] is body["input"][2]
    assert out[3] == {"type": "function_call", "call_id": "call_2", "name": "get_time", "arguments": "{\"tz\":\"UTC\"}"}


def test_every_whole_exchange_can_be_dropped_and_parses_back():
    for name, original in BODIES.items():
        parsed = parse_request(original)
        units = group_exchanges(parsed.messages)
        for unit in units[int(parsed.instructions):]:
            kept = [m for i, m in enumerate(parsed.messages) if i not in unit]
            out = valid(render_request(original, parsed, kept, parsed.tools))
            reparsed = parse_request(out).messages
            assert reparsed == kept, (name, unit)


def test_edits_made_in_place_are_seen():
    body = agent_loop()
    parsed = parse_request(body)
    parsed.messages[-1]["content"] = "And the day after?"
    parsed.tools[1]["function"]["description"] = "Time."
    out = valid(render_request(body, parsed, parsed.messages, parsed.tools))
    assert out["input"][-1] == {"type": "message", "role": "user", "content": "And the day after?"}
    assert out["tools"] == [WEATHER, {**TIME, "description": "Time."}] and out["tools"][0] is WEATHER
    assert body == agent_loop()


def test_an_edited_message_keeps_the_references_before_it():
    body = BODIES["previous_response"]
    parsed = parse_request(body)
    messages = [parsed.messages[0], {"role": "user", "content": "Next step, briefly?"}]
    out = valid(render_request(body, parsed, messages, None))
    assert out["input"] == [*body["input"][:3], {"type": "message", "role": "user", "content": "Next step, briefly?"}]
    messages = [{**parsed.messages[0], "content": "done (archived)"}, parsed.messages[1]]
    out = valid(render_request(body, parsed, messages, None))
    assert out["input"][:2] == body["input"][:2] and out["input"][3] is body["input"][3]
    assert out["input"][2] == {"type": "function_call_output", "call_id": "call_old", "output": "done (archived)"}


def test_a_new_message_between_unchanged_ones_takes_no_riders():
    body = agent_loop()
    parsed = parse_request(body)
    memory = {"role": "developer", "content": "Known: the user prefers Celsius."}
    messages = [*parsed.messages[:5], memory, *parsed.messages[5:]]
    out = valid(render_request(body, parsed, messages, parsed.tools))
    assert out["input"] == [*body["input"][:6], {"type": "message", "role": "developer", "content": memory["content"]},
                            *body["input"][6:]]


def test_instructions_go_back_to_instructions():
    body = BODIES["string_instructions"]
    parsed = parse_request(body)
    assert parsed.messages == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    messages = [{"role": "system", "content": "Be brief.\n\nKnown: the user is Ann."}, parsed.messages[1]]
    out = render_request(body, parsed, messages, None)
    assert out == {**body, "instructions": "Be brief.\n\nKnown: the user is Ann."}
    assert list(out) == list(body)


def test_a_string_input_stays_a_string_when_edited():
    body = BODIES["string"]
    parsed = parse_request(body)
    out = render_request(body, parsed, append_note(parsed.messages, "n"), None)
    assert out == {**body, "input": "Tell me a joke about élan.\n\nn"}
    out = render_request(body, parsed, [{"role": "system", "content": "m"}, *parsed.messages], None)
    assert out["input"] == [{"type": "message", "role": "system", "content": "m"},
                            {"role": "user", "content": "Tell me a joke about élan."}]


def test_rider_only_input_stays_first_when_a_message_is_added():
    body = BODIES["only_riders"]
    parsed = parse_request(body)
    assert parsed.messages == [] and parsed.orphans == [0]
    out = valid(render_request(body, parsed, [{"role": "user", "content": "careful"}], parsed.tools))
    assert out["input"] == [body["input"][0], {"type": "message", "role": "user", "content": "careful"}]
    assert out["tools"] is body["tools"]


def test_tool_filtering_keeps_hosted_tools_and_original_forms():
    body = BODIES["hosted_tools"]
    parsed = parse_request(body)
    assert [t["function"]["name"] for t in parsed.tools] == ["get_weather", "get_time"]
    assert parsed.hosted_tools == [WEB, FILES, MCP]
    assert parsed.tool_choice == {"type": "function", "function": {"name": "get_weather"}}
    recall = {"type": "function", "function": {"name": "context_recall", "description": "Recall archived text.",
                                               "parameters": {"type": "object", "properties": {"ref": {"type": "string"}}}}}
    out = render_request(body, parsed, parsed.messages, [parsed.tools[0], recall])
    # Hosted tools first, as they were; then the policies' list (a kept tool in its original form).
    assert out["tools"] == [WEB, FILES, MCP, WEATHER, {"type": "function", "name": "context_recall",
                                                       "description": "Recall archived text.",
                                                       "parameters": recall["function"]["parameters"]}]
    assert out["tools"][3] is body["tools"][1]
    assert out["input"] is body["input"] and out["tool_choice"] is body["tool_choice"]


def test_filtered_tools_keep_the_policies_append_only_order():
    """A tool found later (find_tools) comes after the ones kept before, not back at its client place."""
    body = BODIES["hosted_tools"]
    parsed = parse_request(body)
    weather, time_ = parsed.tools
    out = render_request(body, parsed, parsed.messages, [time_, weather])
    assert [t["name"] if t["type"] == "function" else t["type"] for t in out["tools"]] == ["web_search_preview", "file_search", "mcp", "get_time", "get_weather"]
    assert render_tools(parsed, [weather, time_]) is UNCHANGED


def test_removing_every_tool_removes_tool_choice():
    body = agent_loop()
    parsed = parse_request(body)
    out = render_request(body, parsed, parsed.messages, [])
    assert "tools" not in out and "tool_choice" not in out and "parallel_tool_calls" not in out
    body = BODIES["hosted_tools"]
    parsed = parse_request(body)
    out = render_request(body, parsed, parsed.messages, None)
    assert out["tools"] == [WEB, FILES, MCP] and "tool_choice" in out


def test_a_changed_tool_choice_is_written_in_responses_form():
    body = BODIES["interleaved"]
    parsed = parse_request(body)
    out = render_request(body, parsed, parsed.messages, parsed.tools, tool_choice="required")
    assert out["tool_choice"] == "required"
    choice = {"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": [
        {"type": "function", "function": {"name": "get_weather"}}]}}
    out = render_request(body, parsed, parsed.messages, parsed.tools, tool_choice=choice)
    assert out["tool_choice"] == {"type": "allowed_tools", "mode": "required",
                                  "tools": [{"type": "function", "name": "get_weather"}]}
    out = render_request(body, parsed, parsed.messages, parsed.tools, tool_choice={"type": "function",
                                                                                   "function": {"name": "get_time"}})
    assert out["tool_choice"] == {"type": "function", "name": "get_time"}


@pytest.mark.parametrize("body", [{"input": 5}, {"input": ["text"]}, {"input": "x", "tools": {"a": 1}}, []])
def test_bodies_that_are_not_responses_requests_are_refused(body):
    with pytest.raises(InvalidRequest) as refused:
        parse_request(body)
    assert refused.value.status == 400 and refused.value.body()["error"]["code"] == "invalid_request"


# ----------------------------------------------------------------------------- answers


def upstream_response() -> dict:
    return {
        "id": "resp_up", "object": "response", "created_at": 1741476542, "status": "completed", "error": None,
        "incomplete_details": None, "instructions": None, "max_output_tokens": None, "model": "gpt-4.1-2025-04-14",
        "output": [
            {"type": "reasoning", "id": "rs_9", "summary": []},
            {"type": "message", "id": "msg_9", "status": "completed", "role": "assistant",
             "content": [{"type": "output_text", "text": "Mount Everest is 8,849 m", "annotations": []},
                         {"type": "output_text", "text": " tall.", "annotations": []}]},
            {"type": "function_call", "id": "fc_9", "call_id": "call_9", "name": "get_weather",
             "arguments": "{\"city\":\"Lhasa\"}", "status": "completed"}],
        "parallel_tool_calls": True, "previous_response_id": None, "reasoning": {"effort": None, "summary": None},
        "store": True, "temperature": 1.0, "text": {"format": {"type": "text"}}, "tool_choice": "auto",
        "tools": [WEATHER], "top_p": 1.0, "truncation": "disabled",
        "usage": {"input_tokens": 36, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                  "output_tokens": 87, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 123},
        "user": None, "metadata": {},
    }


def test_answer_text_joins_output_text_as_the_sdk_does():
    response = upstream_response()
    assert answer_text(response) == Response.model_validate(response).output_text == "Mount Everest is 8,849 m tall."
    assert answer_text({"output": []}) == ""


def test_calls_in_answer():
    assert calls_in_answer(upstream_response()) == [upstream_response()["output"][2]]
    assert calls_in_answer({"output": [{"type": "message", "content": []}]}) == []


def test_replace_answer_is_one_completed_message():
    response = {**upstream_response(), "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}}
    out = replace_answer(response, "[ctxwarden] blocked: the answer contradicted the knowledge base.")
    parsed = Response.model_validate(out)
    assert parsed.status == "completed" and parsed.incomplete_details is None
    assert parsed.output_text == "[ctxwarden] blocked: the answer contradicted the knowledge base."
    assert [i["type"] for i in out["output"]] == ["message"] and out["output"][0]["id"] == "msg_9"
    assert out["usage"] == response["usage"] and response["output"][1]["id"] == "msg_9"  # the input is untouched
    assert calls_in_answer(out) == []


def test_proxy_response_is_a_valid_response_marked_as_the_proxy_s():
    body = proxy_response("gpt-4o", "req42", "[ctxwarden] Loop stopped: the same call repeated 3 times.", "loops.stop",
                          created_at=1700000000)
    parsed = Response.model_validate(body)
    assert parsed.output_text.startswith("[ctxwarden]") and parsed.status == "completed" and parsed.id == "resp_req42"
    assert body["ctxwarden"] == {"author": "proxy", "reason": "loops.stop"}
    assert json.loads(json.dumps(body)) == body


def test_proxy_stream_events_parse_as_the_sdk_s_events():
    text = "[ctxwarden] Which one did you mean: the 2023 or the 2024 figure?"
    events = proxy_stream_events("gpt-4o", "req7", text, "clash.ask_user", created_at=1700000000)
    adapter = TypeAdapter(ResponseStreamEvent)
    parsed = [adapter.validate_python(json.loads(json.dumps(e))) for e in events]
    assert [e.type for e in parsed] == [
        "response.created", "response.output_item.added", "response.content_part.added",
        "response.output_text.delta", "response.output_text.done", "response.content_part.done",
        "response.output_item.done", "response.completed"]
    assert [e.sequence_number for e in parsed] == list(range(8))
    assert "".join(e.delta for e in parsed if e.type == "response.output_text.delta") == text
    assert parsed[0].response.status == "in_progress" and parsed[0].response.output == []
    assert parsed[-1].response.output_text == text
    assert events[-1]["response"]["ctxwarden"] == {"author": "proxy", "reason": "clash.ask_user"}
    item_ids = {e.item_id for e in parsed if hasattr(e, "item_id")} | {e.item.id for e in parsed if hasattr(e, "item")}
    assert item_ids == {"msg_req7"}
    state = ResponseStreamState(input_tools=omit, text_format=omit)  # what client.responses.stream() runs
    for event in parsed:
        state.handle_event(event)
    assert state._completed_response is not None and state._completed_response.output_text == text
