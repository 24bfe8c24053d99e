"""Reading a Responses API request (`POST /v1/responses`) into the chat form policies read.

Chat messages come from `instructions` and `input`; items chat has no form for ride along with
the chat message of the item after them (see `ParsedRequest.sources`) and are never shown to
policies. `ParsedRequest` keeps what `responses_render.render_request` needs to write the
conversation back byte for byte where nothing changed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..errors import ProxyError
from .snapshot import snapshot, tool_snapshot

Item = dict[str, Any]
Message = dict[str, Any]
Tool = dict[str, Any]

MESSAGE_ROLES = frozenset({"user", "assistant", "system", "developer"})


class InvalidRequest(ProxyError):
    """The body is not a Responses request this adapter can read: HTTP 400 invalid_request."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(400, "invalid_request", message, param=param)


@dataclass
class ParsedRequest:
    """A Responses request as policies see it, plus what `render_request` needs to write it back."""

    messages: list[Message]  # chat form; messages[0] is the `instructions` when `instructions` is True
    tools: list[Tool] | None  # the function tools in chat form; None when the body has no `tools`
    tool_choice: Any  # chat form; None when absent
    instructions: bool = False
    string_input: bool = False  # `input` was a string (items then holds one synthetic user item)
    hosted_tools: list[Tool] = field(default_factory=list)  # every non-function tool, untouched
    items: list[Item] = field(default_factory=list)  # the input items (a string input: one synthetic item)
    sources: list[list[int]] = field(default_factory=list)  # per message: its items' indices, riders included
    orphans: list[int] = field(default_factory=list)  # rider items with no message to ride on
    snapshots: list[Message] = field(default_factory=list)  # per message: its value as parsed (snapshot())
    roles: list[Any] = field(default_factory=list)  # per message: its role as parsed
    tool_snapshots: list[Tool] = field(default_factory=list)  # `tools` as parsed (policies may edit in place)
    tool_choice_key: str = "null"
    function_tools: dict[str, tuple[Tool, Tool]] = field(default_factory=dict)  # name → (original, chat snapshot)
    calls: dict[str, Item] = field(default_factory=dict)  # call_id → original function_call item
    outputs: dict[str, Item] = field(default_factory=dict)  # call_id → original function_call_output item
    parts: dict[tuple[bool, str], Any] | None = None  # (assistant?, chat part json) → original part: part_origins()


# ----------------------------------------------------------------------------- parse


def parse_request(body: dict[str, Any]) -> ParsedRequest:
    """Read a Responses body: `instructions` + `input` as chat messages, tools, tool_choice."""
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object")
    raw = body.get("input")
    if isinstance(raw, str):
        items: list[Item] = [{"role": "user", "content": raw}]
    elif raw is None:
        items = []
    elif isinstance(raw, list) and all(isinstance(i, dict) for i in raw):
        items = raw
    else:
        raise InvalidRequest("`input` must be a string or a list of item objects", "input")
    parsed = ParsedRequest(messages=[], tools=None, tool_choice=_chat_choice(body.get("tool_choice")), items=items,
                           string_input=isinstance(raw, str))
    instructions = body.get("instructions")
    if isinstance(instructions, str):
        parsed.instructions = True
        parsed.messages.append({"role": "system", "content": instructions})
        parsed.sources.append([])
    _parse_items(parsed)
    _parse_tools(parsed, body.get("tools"))
    parsed.snapshots = [snapshot(m) for m in parsed.messages]
    parsed.roles = [m["role"] for m in parsed.messages]
    parsed.tool_choice_key = json_key(parsed.tool_choice)
    return parsed


def part_origins(parsed: ParsedRequest) -> dict[tuple[bool, str], Any]:
    """(assistant?, json_key of a chat content part as parsed) → the input item's part it came
    from, the first one where several read the same. Built on first use (render, for a changed
    message with list content), from the snapshots."""
    if parsed.parts is None:
        parts: dict[tuple[bool, str], Any] = {}
        for k, sources in enumerate(parsed.sources):
            for i in sources:
                item = parsed.items[i]
                if item_kind(item) == "message":  # a message's one message item, first of its sources
                    if isinstance(item["content"], list):
                        for original, chat in zip(item["content"], parsed.snapshots[k]["content"]):
                            parts.setdefault((item["role"] == "assistant", json_key(chat)), original)
                    break
        parsed.parts = parts
    return parsed.parts


def item_kind(item: Item) -> str:
    """message | function_call | function_call_output | rider (anything chat has no form for)."""
    kind = item.get("type")
    role = item.get("role")
    if kind in (None, "message") and isinstance(role, str) and role in MESSAGE_ROLES and "content" in item:
        return "message"
    if kind == "function_call" and isinstance(item.get("call_id"), str):
        return "function_call"
    if kind == "function_call_output" and isinstance(item.get("call_id"), str):
        return "function_call_output"
    return "rider"


def _parse_items(parsed: ParsedRequest) -> None:
    """Chat messages from the input items. Consecutive function_calls (and the assistant message
    just before them) make one assistant message; riders join the next message's sources."""
    messages, sources = parsed.messages, parsed.sources
    pending: list[int] = []
    takes_calls = False  # the last message is an assistant one that later function_calls join
    for i, item in enumerate(parsed.items):
        kind = item_kind(item)
        if kind == "rider":
            pending.append(i)
            continue
        if kind == "function_call":
            if not isinstance(item.get("name"), str) or not isinstance(item.get("arguments"), str):
                raise InvalidRequest(f"input[{i}]: a function_call needs a string `name` and `arguments`", f"input[{i}]")
            parsed.calls[item["call_id"]] = item
            call = {"id": item["call_id"], "type": "function",
                    "function": {"name": item.get("name"), "arguments": item.get("arguments")}}
            if takes_calls:
                messages[-1].setdefault("tool_calls", []).append(call)
                sources[-1] += [*pending, i]
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
                sources.append([*pending, i])
            takes_calls = True
        else:
            if kind == "function_call_output":
                parsed.outputs[item["call_id"]] = item
                message = chat_tool_message(item)
            else:
                message = _chat_message(item)
            messages.append(message)
            sources.append([*pending, i])
            takes_calls = message["role"] == "assistant"
        pending = []
    if pending and len(sources) > int(parsed.instructions):
        sources[-1] += pending
    else:
        parsed.orphans = pending


def _chat_message(item: Item) -> Message:
    content = item["content"]
    if not isinstance(content, (str, list)):
        raise InvalidRequest("a message item's `content` must be a string or a list of parts", "input")
    return {"role": item["role"], "content": [_chat_part(p) for p in content] if isinstance(content, list) else content}


def chat_tool_message(item: Item) -> Message:
    output = item.get("output")
    if output is not None and not isinstance(output, (str, list)):
        raise InvalidRequest("a function_call_output's `output` must be a string or a list of parts", "input")
    content = [_chat_part(p) for p in output] if isinstance(output, list) else output
    return {"role": "tool", "tool_call_id": item["call_id"], "content": content}


def _chat_part(part: Any) -> Any:
    """input_text/output_text → text, input_image with a URL → image_url, else an opaque copy."""
    if not isinstance(part, dict):
        return snapshot(part)
    kind = part.get("type")
    if kind in ("input_text", "output_text") and isinstance(part.get("text"), str):
        return {"type": "text", "text": part["text"]}
    if kind == "input_image" and isinstance(part.get("image_url"), str):
        url = {"url": part["image_url"]}
        if part.get("detail") is not None:
            url["detail"] = part["detail"]
        return {"type": "image_url", "image_url": url}
    return snapshot(part)


def json_key(value: Any) -> str:
    """A canonical JSON text of `value`, for comparing by value."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def _parse_tools(parsed: ParsedRequest, tools: Any) -> None:
    if tools is None:
        return
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        raise InvalidRequest("`tools` must be a list of tool objects", "tools")
    parsed.tools = []
    for tool in tools:
        if tool.get("type") == "function" and isinstance(tool.get("name"), str):
            chat = chat_tool(tool)
            parsed.tools.append(chat)
            parsed.tool_snapshots.append(tool_snapshot(chat))
            parsed.function_tools[tool["name"]] = (tool, parsed.tool_snapshots[-1])
        else:
            parsed.hosted_tools.append(tool)


def chat_tool(tool: Tool) -> Tool:
    """A Responses function tool in chat form (name, description, parameters, strict). The
    `parameters` object is the tool's own, not a copy (see snapshot.tool_snapshot)."""
    function = {k: tool[k] for k in ("name", "description", "parameters", "strict") if k in tool}
    return {"type": "function", "function": function}


def responses_tool(tool: Tool) -> Tool:
    """A chat function tool in Responses form; any other tool as it is."""
    if tool.get("type") != "function" or not isinstance(tool.get("function"), dict):
        return tool
    return {"type": "function", **tool["function"]}


def _chat_choice(choice: Any) -> Any:
    """A Responses tool_choice in chat form; hosted-tool choices stay as they are."""
    if not isinstance(choice, dict):
        return choice
    if choice.get("type") == "function" and "name" in choice:
        return {"type": "function", "function": {"name": choice["name"]}}
    if choice.get("type") == "allowed_tools":
        tools = [_chat_choice(t) for t in choice.get("tools") or []]
        return {"type": "allowed_tools", "allowed_tools": {"mode": choice.get("mode"), "tools": tools}}
    return choice


def responses_choice(choice: Any) -> Any:
    if not isinstance(choice, dict):
        return choice
    if choice.get("type") == "function" and isinstance(choice.get("function"), dict):
        return {"type": "function", "name": choice["function"].get("name")}
    if choice.get("type") == "allowed_tools" and isinstance(choice.get("allowed_tools"), dict):
        allowed = choice["allowed_tools"]
        tools = [responses_choice(t) for t in allowed.get("tools") or []]
        return {"type": "allowed_tools", "mode": allowed.get("mode"), "tools": tools}
    return choice
