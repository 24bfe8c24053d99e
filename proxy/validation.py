"""Check a chat-completion body before any policy sees it; name exactly what is wrong.

Bad input gets a 400 naming the problem, never a 500: the body must be UTF-8 JSON (no NaN or
Infinity, no integer longer than Python converts, at most MAX_DEPTH levels of nesting, no lone
UTF-16 surrogate in any string or key) and have the chat shape policies rely on. The checks that
read the whole body stay cheap: one walk over its containers for the depth, and the surrogate walk
only when the raw bytes hold a `\\uD800`–`\\uDFFF` style escape.

The parse itself is orjson's (~4x json's: a 340 KB body with a 525-tool catalog, 2.0 ms with the
checks against 5.8 ms with json's, on the event loop of every request). orjson refuses what this module refuses
(NaN, Infinity, a number past a double, a lone surrogate: no surrogate walk then), but reads an
integer past 64 bits as a float, which would change the body: a body orjson refuses, or in which it
read a float holding a whole number of 2**63 or more, is read again by Python's json, whose reading
(and error message) is the exact one.
"""

from __future__ import annotations

import json
import math
import re
import sys
from typing import Any

import orjson

from .errors import ProxyError, invalid

ROLES = {"system", "developer", "user", "assistant", "tool", "function"}
RESPONSE_FORMATS = ("text", "json_object", "json_schema")
MAX_DEPTH = 128  # arrays and objects nested deeper than this are refused (the policies recurse over bodies)
WIDE_FLOAT = 2.0**63  # a whole-number float from here on may be an integer literal orjson could not hold
_BOM = b"\xef\xbb\xbf"
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")  # may start a lone surrogate (strict UTF-8 has none)
_SURROGATE = re.compile("[\ud800-\udfff]")


def _no_constant(name: str) -> Any:
    """NaN, Infinity or -Infinity: Python's json reads them, JSON has no such values."""
    raise invalid(f"The request body is not valid JSON: {name} is not a JSON value.")


def _finite(text: str) -> float:
    """A number; one past a double's range (1e999), which Python would read as infinity, is refused:
    re-encoded it would go upstream as `Infinity`, which is no JSON."""
    value = float(text)
    if math.isinf(value):
        raise invalid(f"The request body has a number out of range: {text[:40]}.")
    return value


_DECODER = json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite)


def parse_json_body(raw: bytes, needs: str = "`model` and `messages`") -> dict[str, Any]:
    if not raw.strip():
        raise invalid(f"The request body is empty; send a JSON object with {needs}.")
    data = raw[3:] if raw.startswith(_BOM) else raw
    try:
        body, exact = orjson.loads(data), False
    except orjson.JSONDecodeError:
        body, exact = _exact_parse(data), True
    if not isinstance(body, dict):
        raise invalid(f"The request body must be a JSON object, not {_kind(body)}.")
    deep, wide = _scan(body, MAX_DEPTH)
    if wide and not exact:  # maybe an integer past 64 bits that orjson read as a float (module docstring)
        body, exact = _exact_parse(data), True
        deep, _ = _scan(body, MAX_DEPTH)
    if deep:
        raise too_deep()
    if exact and _SURROGATE_ESCAPE.search(data):  # orjson refuses lone surrogates: a body it read has none
        where = _lone_surrogate(body, "")
        if where is not None:
            raise invalid(f"{where} contains a lone UTF-16 surrogate escape (\\ud800-\\udfff): "
                          "text must be valid Unicode.", where)
    return body


def _exact_parse(data: bytes) -> Any:
    """Python's json reading, with the error this module names for each way a body is not JSON."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise invalid(f"The request body is not UTF-8 encoded JSON (invalid byte at offset {exc.start}).")
    try:
        return _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        raise invalid(f"The request body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}.")
    except RecursionError:
        raise too_deep()
    except ValueError:  # the only other one: an integer literal past sys.get_int_max_str_digits()
        raise invalid(f"The request body has an integer with more than {sys.get_int_max_str_digits()} digits.")


def too_deep() -> ProxyError:
    return invalid(f"The request body nests arrays and objects more than {MAX_DEPTH} levels deep.")


def _scan(body: Any, limit: int) -> tuple[bool, bool]:
    """(containers nest more than `limit` levels, a float holds a whole number of 2**63 or more): one
    pass, level by level, over containers."""
    level, depth, wide = [body], 1, False
    while level:
        if depth > limit:
            return True, wide
        deeper = []
        for node in level:
            for child in node.values() if type(node) is dict else node:
                kind = type(child)
                if kind is dict or kind is list:
                    deeper.append(child)
                elif kind is float and not wide:
                    wide = abs(child) >= WIDE_FLOAT and child.is_integer()
        level, depth = deeper, depth + 1
    return False, wide


def _lone_surrogate(node: Any, where: str) -> str | None:
    """The path of the first string or key holding a lone surrogate (e.g. messages[0].content)."""
    if isinstance(node, str):
        return where if not node.isascii() and _SURROGATE.search(node) else None
    if isinstance(node, list):
        for i, item in enumerate(node):
            found = _lone_surrogate(item, f"{where}[{i}]")
            if found is not None:
                return found
    elif isinstance(node, dict):
        for key, value in node.items():
            shown = key.encode("utf-8", "backslashreplace").decode("utf-8")
            path = f"{where}.{shown}" if where else shown
            if not key.isascii() and _SURROGATE.search(key):
                return path
            found = _lone_surrogate(value, path)
            if found is not None:
                return found
    return None


def check_chat_body(body: dict[str, Any]) -> None:
    """Raise ProxyError(400) naming the first problem (its `param` is the path, e.g. messages[2].role)."""
    messages = _check_top_level(body)
    _check_tools(body.get("tools"))
    _check_options(body)
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
    if not isinstance(role, str) or role not in ROLES:
        shown = "missing" if role is None else _shown(role)
        raise invalid(f"{where}.role is {shown}; it must be one of {', '.join(sorted(ROLES))}.", f"{where}.role")
    content = msg.get("content")
    _check_content(where, content)
    if msg.get("name") is not None and not isinstance(msg["name"], str):
        raise invalid(f"{where}.name must be a string, not {_kind(msg['name'])}.", f"{where}.name")
    if role == "assistant":
        return _tool_call_ids(where, msg.get("tool_calls"))
    if msg.get("tool_calls") is not None:
        raise invalid(f"{where} ({role}) has 'tool_calls'; only assistant messages make tool calls.", f"{where}.tool_calls")
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
            if part["type"] == "text" and not isinstance(part.get("text"), str):
                raise invalid(f"{where}.content[{j}].text must be a string.", f"{where}.content[{j}].text")


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
        kind = "custom" if call.get("type") == "custom" else "function"  # OpenAI's custom tools: {name, input}
        body = call.get(kind)
        if not isinstance(body, dict) or not isinstance(body.get("name"), str):
            raise invalid(f"{where}.tool_calls[{j}].{kind} must have a string 'name'.", f"{where}.tool_calls[{j}].{kind}")
        ids.add(call["id"])
    return ids


def _check_tool_answer(where: str, msg: dict[str, Any], open_calls: set[str]) -> None:
    call_id = msg.get("tool_call_id")
    if not isinstance(call_id, str):
        raise invalid(f"{where} is a tool message without a string 'tool_call_id'.", f"{where}.tool_call_id")
    if call_id not in open_calls:
        raise invalid(
            f"{where} answers tool_call_id {_shown(call_id)}, but the closest preceding assistant message "
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
        kind = tool.get("type", "function")
        if not isinstance(kind, str):
            raise invalid(f"{where}.type must be a string, not {_kind(kind)}.", f"{where}.type")
        fn = tool.get("function")
        if kind == "function" or "function" in tool:  # the proxy reads a function's name whatever the type
            if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
                raise invalid(f"{where}.function.name is missing; every function tool needs a name.", f"{where}.function.name")
            if fn.get("parameters") is not None and not isinstance(fn["parameters"], dict):
                raise invalid(f"{where}.function.parameters must be a JSON Schema object, not {_kind(fn['parameters'])}.",
                              f"{where}.function.parameters")


def _check_options(body: dict[str, Any]) -> None:
    """`user`, `stream_options` and `response_format`: the fields the proxy itself reads."""
    user = body.get("user")
    if user is not None and not isinstance(user, str):
        raise invalid(f"'user' must be a string, not {_kind(user)}.", "user")
    options = body.get("stream_options")
    if options is not None:
        if not isinstance(options, dict):
            raise invalid(f"'stream_options' must be an object, not {_kind(options)}.", "stream_options")
        usage = options.get("include_usage")
        if usage is not None and not isinstance(usage, bool):
            raise invalid(f"'stream_options.include_usage' must be a boolean, not {_kind(usage)}.",
                          "stream_options.include_usage")
    _check_response_format(body.get("response_format"))


def _check_response_format(fmt: Any) -> None:
    """{"type": "text" | "json_object"} or {"type": "json_schema", "json_schema": {"name", "schema"?, "strict"?}}."""
    if fmt is None:
        return
    if not isinstance(fmt, dict):
        raise invalid(f"'response_format' must be an object, not {_kind(fmt)}.", "response_format")
    kind = fmt.get("type")
    if not isinstance(kind, str) or kind not in RESPONSE_FORMATS:
        shown = "missing" if kind is None else _shown(kind)
        raise invalid(f"'response_format.type' is {shown}; it must be one of {', '.join(RESPONSE_FORMATS)}.",
                      "response_format.type")
    if kind != "json_schema":
        return
    spec = fmt.get("json_schema")
    if not isinstance(spec, dict):
        raise invalid("'response_format.json_schema' must be an object with a 'name' (and a 'schema').",
                      "response_format.json_schema")
    if not isinstance(spec.get("name"), str) or not spec["name"]:
        raise invalid("'response_format.json_schema.name' must be a non-empty string.", "response_format.json_schema.name")
    if spec.get("schema") is not None and not isinstance(spec["schema"], dict):
        raise invalid(f"'response_format.json_schema.schema' must be an object, not {_kind(spec['schema'])}.",
                      "response_format.json_schema.schema")
    if spec.get("strict") is not None and not isinstance(spec["strict"], bool):
        raise invalid(f"'response_format.json_schema.strict' must be a boolean, not {_kind(spec['strict'])}.",
                      "response_format.json_schema.strict")


def _shown(value: Any, limit: int = 60) -> str:
    """A client's value inside an error message: repr, cut short."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number"}.get(type(value), type(value).__name__)


def body_too_large(limit_mb: float) -> ProxyError:
    return ProxyError(413, "request_too_large", f"The request body is larger than the proxy's limit of {limit_mb:g} MB (server.max_body_mb).")
