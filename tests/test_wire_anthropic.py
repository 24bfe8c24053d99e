"""The Messages API wire adapter: parse → (edit) → render, byte for byte where nothing changed."""

from __future__ import annotations

import copy
import json

import pytest
from anthropic.types import Message as AnthropicMessage
from anthropic.types import RawMessageStreamEvent
from anthropic.types.shared import ErrorResponse
from pydantic import TypeAdapter

from ctxwarden.policies.messages import append_note, group_exchanges
from ctxwarden.proxy.wire.anthropic import (
    THINKING_KEY,
    AnthropicWireError,
    answer_as_chat,
    answer_text,
    error_body,
    parse_request,
    proxy_response,
    proxy_stream_events,
    render_request,
    replace_answer,
    tool_uses_in_answer,
)

CC = {"type": "ephemeral"}
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


def agent_body() -> dict:
    """A coding agent's request: cached system blocks, tools (one a server tool), two tool
    exchanges with thinking, an image, a cache breakpoint on the last user block."""
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 4096,
        "stream": True,
        "metadata": {"user_id": "u-1"},
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "system": [
            {"type": "text", "text": "You are a careful coding agent."},
            {"type": "text", "text": "Repository conventions: ruff, pytest.", "cache_control": CC},
        ],
        "tools": [
            {
                "name": "read_file",
                "description": "Read a file",
                "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
            },
            {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
            {
                "name": "run_tests",
                "description": "Run the tests",
                "input_schema": {"type": "object", "properties": {}},
                "cache_control": CC,
            },
        ],
        "tool_choice": {"type": "auto"},
        "messages": [
            {"role": "user", "content": "Fix the failing test in app.py"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "I should read app.py first.", "signature": "EqQBCkgIARABGAIi+sig/1=="},
                    {"type": "text", "text": "Reading the file."},
                    {"type": "tool_use", "id": "toolu_01", "name": "read_file", "input": {"path": "app.py"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_01", "content": [{"type": "text", "text": "def add(a, b): return a - b"}]},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIw"},
                    {"type": "tool_use", "id": "toolu_02", "name": "run_tests", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_02", "content": "1 failed: test_add", "is_error": True},
                    {"type": "text", "text": "Here is the screenshot of the CI page."},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
                    {"type": "text", "text": "Please fix it.", "cache_control": CC},
                ],
            },
        ],
    }


def dumps(body: dict) -> str:
    return json.dumps(body, ensure_ascii=False)


def roundtrip(body: dict, edit=None, tools=None) -> dict:
    original = dumps(body)
    parsed = parse_request(body)
    messages = parsed.messages if edit is None else edit(parsed.messages)
    out = render_request(body, parsed, messages, parsed.tools if tools is None else tools)
    assert dumps(body) == original, "render must not mutate the client's body"
    return out


def assert_alternates(body: dict) -> None:
    roles = [m["role"] for m in body["messages"]]
    assert all(a != b for a, b in zip(roles, roles[1:])), roles


# ----------------------------------------------------------------------------- parse


def test_parse_gives_the_chat_conversation_the_policies_read():
    parsed = parse_request(agent_body())
    roles = [m["role"] for m in parsed.messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool", "user"]
    system, _, first, result, second, error, last = parsed.messages
    assert system["content"] == [
        {"type": "text", "text": "You are a careful coding agent."},
        {"type": "text", "text": "Repository conventions: ruff, pytest."},
    ]
    assert first["content"] == "Reading the file."
    assert first["tool_calls"] == [{"id": "toolu_01", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "app.py"}'}}]
    assert first[THINKING_KEY][0]["signature"] == "EqQBCkgIARABGAIi+sig/1=="
    assert "I should read" not in json.dumps(first["content"])
    assert result == {"role": "tool", "tool_call_id": "toolu_01", "content": "def add(a, b): return a - b"}
    assert second["content"] is None and second[THINKING_KEY][0]["type"] == "redacted_thinking"
    assert error["content"] == "1 failed: test_add"
    assert last["content"][1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}
    assert group_exchanges(parsed.messages) == [[0], [1], [2, 3], [4, 5], [6]]
    assert [t["function"]["name"] for t in parsed.tools] == ["read_file", "run_tests"]
    assert parsed.tools[0]["function"]["parameters"]["required"] == ["path"]
    assert parsed.server_tools == [agent_body()["tools"][1]]
    assert parsed.tool_choice == "auto"
    assert parsed.last_breakpoint == 6


def test_tool_results_come_before_the_text_of_their_turn():
    body = {"model": "m", "max_tokens": 10, "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {"x": [1, 2]}}]},
        {"role": "user", "content": [{"type": "text", "text": "and also"}, {"type": "tool_result", "tool_use_id": "t1"}]},
    ]}
    parsed = parse_request(body)
    assert [m["role"] for m in parsed.messages] == ["user", "assistant", "tool", "user"]
    assert parsed.messages[2] == {"role": "tool", "tool_call_id": "t1", "content": ""}
    assert json.loads(parsed.messages[1]["tool_calls"][0]["function"]["arguments"]) == {"x": [1, 2]}
    assert render_request(body, parsed, parsed.messages, parsed.tools) is body


@pytest.mark.parametrize(
    ("choice", "chat", "parallel"),
    [
        ({"type": "auto"}, "auto", None),
        ({"type": "any", "disable_parallel_tool_use": True}, "required", False),
        ({"type": "tool", "name": "read_file"}, {"type": "function", "function": {"name": "read_file"}}, None),
        ({"type": "none"}, "none", None),
        ("none", "none", None),
    ],
)
def test_tool_choice_maps_to_chat(choice, chat, parallel):
    parsed = parse_request({"model": "m", "max_tokens": 1, "messages": [], "tool_choice": choice})
    assert (parsed.tool_choice, parsed.parallel_tool_calls) == (chat, parallel)


def test_malformed_bodies_say_what_is_wrong():
    with pytest.raises(AnthropicWireError, match="messages"):
        parse_request({"model": "m"})
    with pytest.raises(AnthropicWireError, match="role"):
        parse_request({"messages": [{"role": "system", "content": "x"}]})
    with pytest.raises(AnthropicWireError, match="tool_choice"):
        parse_request({"messages": [], "tool_choice": {"type": "sometimes"}})


# ----------------------------------------------------------------------------- round trips


@pytest.mark.parametrize(
    "variant",
    ["agent", "system_string", "no_system", "url_image", "consecutive_users", "server_tool_blocks", "citations"],
)
def test_unchanged_conversation_renders_byte_identical(variant):
    body = agent_body()
    if variant == "system_string":
        body["system"] = "You are terse."
    elif variant == "no_system":
        del body["system"]
        del body["tools"]
        del body["tool_choice"]
    elif variant == "url_image":
        body["messages"][4]["content"][2] = {"type": "image", "source": {"type": "url", "url": "https://x.test/ci.png"}}
    elif variant == "consecutive_users":  # the API accepts them and merges server-side; we keep them
        body["messages"][0:1] = [{"role": "user", "content": "Context: py3.11"}, {"role": "user", "content": [{"type": "text", "text": "Fix it"}]}]
    elif variant == "server_tool_blocks":
        body["messages"][1]["content"][1:1] = [
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "pytest add"}},
            {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [
                {"type": "web_search_result", "url": "https://docs.pytest.org", "title": "pytest", "encrypted_content": "Eq8=", "page_age": None},
            ]},
        ]
    elif variant == "citations":
        body["messages"][1]["content"][1]["citations"] = [
            {"type": "char_location", "cited_text": "add", "document_index": 0, "document_title": None, "start_char_index": 0, "end_char_index": 3},
        ]
        body["messages"][0]["content"] = [
            {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "def add"}, "citations": {"enabled": True}},
            {"type": "text", "text": "Fix the failing test in app.py"},
        ]
    original = dumps(body)
    out = roundtrip(body)
    assert out is body
    assert dumps(out) == original
    # a copy of every message (as a policy that rebuilds the list makes) is still "unchanged"
    parsed = parse_request(body)
    copied = render_request(body, parsed, [dict(m) for m in parsed.messages], [dict(t) for t in parsed.tools])
    assert dumps(copied) == original


def test_edited_message_is_converted_and_the_rest_stays_byte_identical():
    body = agent_body()

    def edit(messages):
        messages = copy.deepcopy(messages)
        messages[3]["content"] = "[archived: ref=abc123, 7 tokens]"  # the first tool result
        return messages

    out = roundtrip(body, edit)
    original = agent_body()
    assert out["system"] == original["system"] and out["system"][1]["cache_control"] == CC
    assert out["messages"][2] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "[archived: ref=abc123, 7 tokens]"}],
    }
    for k in (0, 1, 3, 4):
        assert dumps(out["messages"][k]) == dumps(original["messages"][k])
    assert out["messages"][4]["content"][-1]["cache_control"] == CC
    assert out["messages"][1]["content"][0]["signature"] == "EqQBCkgIARABGAIi+sig/1=="
    assert out["tools"] is body["tools"] and out["model"] == body["model"] and out["thinking"] == body["thinking"]


def test_edited_text_part_keeps_its_cache_breakpoint_and_siblings():
    body = agent_body()

    def edit(messages):
        last = copy.deepcopy(messages[-1])
        last["content"][2]["text"] = "Please fix it, quickly."
        return [*messages[:-1], last]

    last = roundtrip(body, edit)["messages"][-1]["content"]
    assert last[3] == {"type": "text", "text": "Please fix it, quickly.", "cache_control": CC}
    assert last[:3] == agent_body()["messages"][-1]["content"][:3]


def test_a_note_appended_to_the_last_user_turn_is_one_more_text_block():
    body = agent_body()
    out = roundtrip(body, lambda m: append_note(m, "[ctxwarden] note: two facts disagree."))
    original = agent_body()
    assert dumps(out["messages"][:4]) == dumps(original["messages"][:4])
    content = out["messages"][4]["content"]
    assert dumps(content[:4]) == dumps(original["messages"][4]["content"])
    assert content[4:] == [{"type": "text", "text": "[ctxwarden] note: two facts disagree."}]


def test_a_note_after_tool_results_joins_their_user_turn():
    body = agent_body()
    body["messages"] = body["messages"][:3]
    out = roundtrip(body, lambda m: append_note(m, "note"))
    assert_alternates(out)
    assert out["messages"][2]["content"] == [*agent_body()["messages"][2]["content"], {"type": "text", "text": "note"}]


def test_a_note_on_a_string_turn_stays_a_string():
    body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    out = roundtrip(body, lambda m: append_note(m, "note"))
    assert out["messages"] == [{"role": "user", "content": "hi\n\nnote"}]


def test_dropping_an_exchange_drops_its_tool_use_and_tool_result_together():
    body = agent_body()
    out = roundtrip(body, lambda m: [m[0], m[1], m[4], m[5], m[6]])  # drop assistant toolu_01 + its result
    assert_alternates(out)
    text = dumps(out)
    assert "toolu_01" not in text and "I should read app.py" not in text
    original = agent_body()["messages"]
    assert out["messages"] == [original[0], original[3], original[4]]
    assert dumps(out["messages"][2]) == dumps(original[4])


def test_dropping_an_exchange_keeps_the_text_of_its_result_turn():
    body = agent_body()
    body["messages"][2]["content"].append({"type": "text", "text": "Also check utils.py"})
    out = roundtrip(body, lambda m: [m[0], m[1], *m[4:]])  # assistant(toolu_01) + its tool result gone
    assert_alternates(out)
    assert out["messages"][0] == {"role": "user", "content": [
        {"type": "text", "text": "Fix the failing test in app.py"},
        {"type": "text", "text": "Also check utils.py"},
    ]}
    assert "toolu_01" not in dumps(out)


def test_an_inserted_summary_user_message_keeps_roles_alternating():
    body = agent_body()
    summary = {"role": "user", "content": "[ctxwarden summary] Earlier: the user asked for a CI fix."}
    out = roundtrip(body, lambda m: [m[0], summary, *m[1:]])  # before the first user turn
    assert_alternates(out)
    assert out["messages"][0] == {"role": "user", "content": [
        {"type": "text", "text": summary["content"]},
        {"type": "text", "text": "Fix the failing test in app.py"},
    ]}
    original = agent_body()
    assert dumps(out["messages"][1:]) == dumps(original["messages"][1:])
    assert dumps(out["system"]) == dumps(original["system"])


def test_a_summary_replacing_old_turns_stands_as_its_own_user_turn():
    body = agent_body()
    summary = {"role": "user", "content": "[ctxwarden summary] The agent read app.py: add() subtracts."}
    out = roundtrip(body, lambda m: [m[0], summary, *m[4:]])  # the first two exchanges summarized
    assert_alternates(out)
    assert out["messages"][0] == summary
    assert dumps(out["messages"][1:]) == dumps(agent_body()["messages"][3:])


def test_a_summary_before_a_result_turn_goes_after_its_tool_results():
    body = agent_body()
    summary = {"role": "user", "content": "summary"}
    out = roundtrip(body, lambda m: [m[0], m[4], summary, m[5], m[6]])
    assert_alternates(out)
    kinds = [b["type"] for b in out["messages"][1]["content"]]
    assert kinds[0] == "tool_result" and "summary" in dumps(out["messages"][1]["content"][1:])


def test_an_edited_assistant_turn_keeps_thinking_and_tool_use_blocks():
    body = agent_body()

    def edit(messages):
        messages = list(messages)
        messages[2] = {**messages[2], "content": "Reading app.py."}
        return messages

    content = roundtrip(body, edit)["messages"][1]["content"]
    original = agent_body()["messages"][1]["content"]
    assert content == [original[0], {"type": "text", "text": "Reading app.py."}, original[2]]


def test_new_assistant_tool_call_becomes_a_tool_use_block():
    body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    call = {"id": "call_9", "type": "function", "function": {"name": "context_recall", "arguments": '{"ref": "r1"}'}}
    out = roundtrip(body, lambda m: [*m, {"role": "assistant", "content": None, "tool_calls": [call]},
                                     {"role": "tool", "tool_call_id": "call_9", "content": "the text"}])
    assert out["messages"][1:] == [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "call_9", "name": "context_recall", "input": {"ref": "r1"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_9", "content": "the text"}]},
    ]


def test_system_prompt_edits():
    body = agent_body()
    out = roundtrip(body, lambda m: [{"role": "system", "content": [*m[0]["content"], {"type": "text", "text": "Memory: user prefers tabs."}]}, *m[1:]])
    assert out["system"] == [*agent_body()["system"], {"type": "text", "text": "Memory: user prefers tabs."}]
    body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    assert roundtrip(body, lambda m: [{"role": "system", "content": "Be brief."}, *m])["system"] == "Be brief."


def test_tools_filtered_and_added():
    body = agent_body()
    parsed = parse_request(body)
    recall = {"type": "function", "function": {"name": "context_recall", "description": "Recall archived content",
                                               "parameters": {"type": "object", "properties": {"ref": {"type": "string"}}}}}
    out = render_request(body, parsed, parsed.messages, [parsed.tools[1], recall])
    original = agent_body()["tools"]
    assert out["tools"] == [original[1], original[2], {"name": "context_recall", "description": "Recall archived content",
                                                        "input_schema": recall["function"]["parameters"]}]
    assert out["messages"] is body["messages"] and out["system"] is body["system"]


def test_tool_choice_rendered_back():
    body = agent_body()
    parsed = parse_request(body)
    out = render_request(body, parsed, parsed.messages, None, tool_choice={"type": "function", "function": {"name": "run_tests"}})
    assert out["tool_choice"] == {"type": "tool", "name": "run_tests"}
    assert render_request(body, parsed, parsed.messages, None, tool_choice="required")["tool_choice"] == {"type": "any"}
    assert "tool_choice" not in render_request(body, parsed, parsed.messages, None, tool_choice=None)
    assert render_request(body, parsed, parsed.messages, None, tool_choice="auto") is body


def test_in_place_edit_is_seen():
    body = agent_body()
    parsed = parse_request(body)
    parsed.messages[1]["content"] = "Fix the failing test in app.py and lib.py"
    out = render_request(body, parsed, parsed.messages, parsed.tools)
    assert out["messages"][0] == {"role": "user", "content": "Fix the failing test in app.py and lib.py"}


def test_bad_tool_arguments_are_an_error():
    body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    parsed = parse_request(body)
    bad = {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{"}}]}
    with pytest.raises(AnthropicWireError, match="not JSON"):
        render_request(body, parsed, [*parsed.messages, bad], None)


# ----------------------------------------------------------------------------- answers


def upstream_answer() -> dict:
    return {
        "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": [
            {"type": "thinking", "thinking": "hm", "signature": "sig"},
            {"type": "text", "text": "Everest is 8,849 m. "},
            {"type": "text", "text": "Running tests."},
            {"type": "tool_use", "id": "toolu_9", "name": "run_tests", "input": {"k": "add"}},
        ],
        "stop_reason": "tool_use", "stop_sequence": None,
        "usage": {"input_tokens": 120, "output_tokens": 30},
    }


def test_reading_an_answer():
    answer = upstream_answer()
    assert answer_text(answer) == "Everest is 8,849 m. Running tests."
    assert tool_uses_in_answer(answer) == [{"type": "tool_use", "id": "toolu_9", "name": "run_tests", "input": {"k": "add"}}]
    assert answer_as_chat(answer)["tool_calls"][0]["function"] == {"name": "run_tests", "arguments": '{"k": "add"}'}
    AnthropicMessage.model_validate(answer)


def test_replace_answer_is_one_text_block():
    blocked = replace_answer(upstream_answer(), "[ctxwarden] answer withheld: it contradicts the knowledge base.")
    parsed = AnthropicMessage.model_validate(blocked)
    assert [b.type for b in parsed.content] == ["text"] and parsed.stop_reason == "refusal"  # as a blocked stream ends
    assert blocked["usage"] == upstream_answer()["usage"] and blocked["id"] == "msg_01"


def test_proxy_response_is_a_valid_message():
    made = proxy_response("claude-sonnet-4-5", "req-7", "[ctxwarden] The same call repeated 5 times; stopped.", "loops.stop")
    message = AnthropicMessage.model_validate(made)
    assert message.content[0].text.startswith("[ctxwarden]") and message.stop_reason == "end_turn"
    assert made["ctxwarden"] == {"author": "proxy", "reason": "loops.stop"}


def test_proxy_stream_events_validate_and_spell_the_text():
    events = proxy_stream_events("claude-sonnet-4-5", "req-8", "[ctxwarden] Which file did you mean?", "clash.ask_user")
    adapter = TypeAdapter(RawMessageStreamEvent)
    names = [name for name, _ in events]
    assert names == ["message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"]
    for name, data in events:
        assert adapter.validate_python(data).type == name == data["type"]
    assert "".join(d["delta"]["text"] for n, d in events if n == "content_block_delta") == "[ctxwarden] Which file did you mean?"
    assert events[4][1]["delta"]["stop_reason"] == "end_turn"


@pytest.mark.parametrize(
    ("status", "kind"),
    [(400, "invalid_request_error"), (401, "authentication_error"), (403, "permission_error"), (404, "not_found_error"),
     (413, "request_too_large"), (429, "rate_limit_error"), (500, "api_error"), (529, "overloaded_error"),
     (422, "invalid_request_error"), (502, "api_error")],
)
def test_error_body_shape(status, kind):
    body = error_body(status, None, "context_length_exceeded: the request is over the model's window")
    assert body == {"type": "error", "error": {"type": kind, "message": "context_length_exceeded: the request is over the model's window"}}
    if kind != "request_too_large":  # the SDK's union lacks this documented type
        ErrorResponse.model_validate(body)
    assert error_body(400, "invalid_request_error", "x")["error"]["type"] == "invalid_request_error"
