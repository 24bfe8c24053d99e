"""Tools and tool choice: Anthropic's form ↔ chat's. Custom tools (with `input_schema`) become
chat function tools; Anthropic's server tools (web search, code execution, …) are set aside and
forwarded untouched."""

from __future__ import annotations

from typing import Any

from ctxwarden.policies.errors import CtxwardenError

Block = dict[str, Any]
Message = dict[str, Any]
UNCHANGED: Any = object()  # "the policies did not touch this": keep the body's own value


class AnthropicWireError(CtxwardenError, ValueError):
    """A Messages body (or an edited conversation) that cannot be converted; the message says why."""


def parse_tools(tools: Any) -> tuple[list[Message], list[Block], list[Block]]:
    if tools is None:
        return [], [], []
    if not isinstance(tools, list):
        raise AnthropicWireError("`tools` must be a list")
    chat: list[Message] = []
    origins: list[Block] = []
    server: list[Block] = []
    for tool in tools:
        if not isinstance(tool, dict):
            raise AnthropicWireError("each entry of `tools` must be an object")
        if "input_schema" in tool and tool.get("type") in (None, "custom"):
            if not isinstance(tool.get("name"), str):
                raise AnthropicWireError("a custom tool needs a string `name`")
            function: Message = {"name": tool["name"]}
            if "description" in tool:
                function["description"] = tool["description"]
            function["parameters"] = tool["input_schema"]
            if "strict" in tool:
                function["strict"] = tool["strict"]
            chat.append({"type": "function", "function": function})
            origins.append(tool)
        else:
            server.append(tool)
    return chat, origins, server


def parse_tool_choice(choice: Any) -> tuple[Any, bool | None]:
    """Anthropic tool_choice → (chat tool_choice, parallel_tool_calls)."""
    if choice is None:
        return None, None
    if isinstance(choice, str):
        choice = {"type": choice}
    if not isinstance(choice, dict):
        raise AnthropicWireError("`tool_choice` must be an object such as {\"type\": \"auto\"}")
    parallel = None if "disable_parallel_tool_use" not in choice else not choice["disable_parallel_tool_use"]
    kind = choice.get("type")
    if kind == "auto":
        return "auto", parallel
    if kind == "any":
        return "required", parallel
    if kind == "none":
        return "none", parallel
    if kind == "tool":
        return {"type": "function", "function": {"name": choice.get("name", "")}}, parallel
    raise AnthropicWireError(f"unknown tool_choice type {kind!r} (auto, any, tool or none)")


def render_tools(body: dict[str, Any], parsed: Any, tools: list[Message]) -> Any:
    """The server tools (always kept, first, in their order), then the chat tools in the policies'
    order: a kept tool as its original block (cache_control and all), a new one converted. The
    policies' order is the session's append-only list: a tool found later comes last, never back
    at its place in the client's list (that would change the cached prefix of `tools`)."""
    if tools == parsed._tool_snapshots:
        return UNCHANGED
    snapshots = parsed._tool_snapshots
    kept = [False] * len(snapshots)
    out: list[Block] = list(parsed.server_tools)
    for tool in tools:
        j = next((j for j, s in enumerate(snapshots) if not kept[j] and s == tool), None)
        if j is None:
            out.append(tool_from_chat(tool))
        else:
            kept[j] = True
            out.append(parsed.tool_origins[j])
    return out


def tool_from_chat(tool: Message) -> Block:
    """A chat function tool as an Anthropic custom tool."""
    function = tool.get("function") if tool.get("type") == "function" else None
    if not isinstance(function, dict) or not function.get("name"):
        raise AnthropicWireError("a chat tool must be {'type': 'function', 'function': {'name', …}}")
    out: Block = {"name": function["name"]}
    if function.get("description"):
        out["description"] = function["description"]
    out["input_schema"] = function.get("parameters") or {"type": "object", "properties": {}}
    if "strict" in function:
        out["strict"] = function["strict"]
    return out


def render_tool_choice(body: dict[str, Any], parsed: Any, choice: Any, parallel: Any) -> Any:
    if choice is UNCHANGED:
        choice = parsed.tool_choice
    if parallel is UNCHANGED:
        parallel = parsed.parallel_tool_calls
    if choice == parsed.tool_choice and parallel == parsed.parallel_tool_calls:
        return UNCHANGED
    if choice is None:
        return None
    if choice in ("auto", "required", "none"):
        out: Block = {"type": {"auto": "auto", "required": "any", "none": "none"}[choice]}
    elif isinstance(choice, dict) and choice.get("type") == "function":
        out = {"type": "tool", "name": (choice.get("function") or {}).get("name", "")}
    else:
        raise AnthropicWireError(f"tool_choice {choice!r} has no Anthropic equivalent")
    if parallel is not None and out["type"] != "none":
        out["disable_parallel_tool_use"] = not parallel
    return out
