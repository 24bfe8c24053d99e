"""Check a chat-completion body before any policy sees it; name exactly what is wrong."""

from __future__ import annotations

import json
from typing import Any

from .errors import ProxyError, invalid

ROLES = {"system", "developer", "user", "assistant", "tool", "function"}


def parse_json_body(raw: bytes) -> dict[str, Any]:
    if not raw.strip():
        raise invalid("The request body is empty; send a JSON object with `model` and `messages`.")
    try:
        body = json.loads(raw)
    except UnicodeDecodeError:
        raise invalid("The request body is not UTF-8 encoded JSON.")
    except json.JSONDecodeError as exc:
        raise invalid(f"The request body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}.")
    if not isinstance(body, dict):
        raise invalid(f"The request body must be a JSON object, not {_kind(body)}.")
    return body


def check_chat_body(body: dict[str, Any]) -> None:
    """Raise ProxyError(400) naming the first problem (its `param` is the path, e.g. messages[2].role)."""
    messages = _check_top_level(body)
    _check_tools(body.get("tools"))
    open_calls: set[str] = set()
    for i, msg in enumerate(messages):
        open_calls = _check_message(f"messages[{i}]", msg, open_calls)


def _check_top_level(body: dict[str, Any]) -> list[Any]:
    """`model`, `messages` and the boolean flags; returns the messages."""
    model = body.get("model")
    if model is None:
        raise invalid("Missing required parameter: 'model'.", "model")
    if not isinstance(model, str) or not model.strip():
        raise invalid(f"'model' must be a non-empty string, not {_kind(model)}.", "model")
    messages = body.get("messages")
    if messages is None:
        raise invalid("Missing required parameter: 'messages'.", "messages")
    if not isinstance(messages, list):
        raise invalid(f"'messages' must be an array of message objects, not {_kind(messages)}.", "messages")
    if not messages:
        raise invalid("'messages' must contain at least one message.", "messages")
    for key in ("stream", "parallel_tool_calls"):
        if key in body and body[key] is not None and not isinstance(body[key], bool):
            raise invalid(f"'{key}' must be a boolean, not {_kind(body[key])}.", key)
    return messages


def _check_message(where: str, msg: Any, open_calls: set[str]) -> set[str]:
    """Check one message; return the tool-call ids a following tool message may answer."""
    if not isinstance(msg, dict):
        raise invalid(f"{where} must be an object, not {_kind(msg)}.", where)
    role = msg.get("role")
    if role not in ROLES:
        shown = "missing" if role is None else repr(role)
        raise invalid(f"{where}.role is {shown}; it must be one of {', '.join(sorted(ROLES))}.", f"{where}.role")
    content = msg.get("content")
    _check_content(where, content)
    if role == "assistant":
        return _tool_call_ids(where, msg.get("tool_calls"))
    if role == "tool":
        _check_tool_answer(where, msg, open_calls)
    elif role in ("user", "system", "developer"):
        if content is None:
            raise invalid(f"{where} ({role}) has no 'content'.", f"{where}.content")
        return set()
    return open_calls


def _check_content(where: str, content: Any) -> None:
    if content is not None and not isinstance(content, (str, list)):
        raise invalid(f"{where}.content must be a string or an array of content parts, not {_kind(content)}.", f"{where}.content")
    if isinstance(content, list):
        for j, part in enumerate(content):
            if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                raise invalid(f"{where}.content[{j}] must be an object with a string 'type'.", f"{where}.content[{j}]")


def _tool_call_ids(where: str, calls: Any) -> set[str]:
    """The ids of an assistant message's tool calls, each call checked."""
    if calls is None:
        return set()
    if not isinstance(calls, list):
        raise invalid(f"{where}.tool_calls must be an array.", f"{where}.tool_calls")
    ids: set[str] = set()
    for j, call in enumerate(calls):
        if not isinstance(call, dict) or not isinstance(call.get("id"), str):
            raise invalid(f"{where}.tool_calls[{j}] must be an object with a string 'id'.", f"{where}.tool_calls[{j}]")
        fn = call.get("function")
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise invalid(f"{where}.tool_calls[{j}].function must have a string 'name'.", f"{where}.tool_calls[{j}].function")
        ids.add(call["id"])
    return ids


def _check_tool_answer(where: str, msg: dict[str, Any], open_calls: set[str]) -> None:
    call_id = msg.get("tool_call_id")
    if not isinstance(call_id, str):
        raise invalid(f"{where} is a tool message without a string 'tool_call_id'.", f"{where}.tool_call_id")
    if call_id not in open_calls:
        raise invalid(
            f"{where} answers tool_call_id {call_id!r}, but the closest preceding assistant message "
            "has no tool call with that id.",
            f"{where}.tool_call_id",
        )


def _check_tools(tools: Any) -> None:
    if tools is None:
        return
    if not isinstance(tools, list):
        raise invalid(f"'tools' must be an array, not {_kind(tools)}.", "tools")
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        if not isinstance(tool, dict):
            raise invalid(f"{where} must be an object.", where)
        if tool.get("type", "function") == "function":
            fn = tool.get("function")
            if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
                raise invalid(f"{where}.function.name is missing; every function tool needs a name.", f"{where}.function.name")


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number"}.get(type(value), type(value).__name__)


def body_too_large(limit_mb: float) -> ProxyError:
    return ProxyError(413, "request_too_large", f"The request body is larger than the proxy's limit of {limit_mb:g} MB (server.max_body_mb).")
