"""Anthropic Messages request → the chat-completions messages and tools the policies read.

Every chat message remembers the Anthropic blocks it came from (a `Piece`), so that
`anthropic_render.render_request` can send unchanged messages back as those very blocks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .anthropic_tools import AnthropicWireError, parse_tool_choice, parse_tools
from .snapshot import snapshot, tool_snapshot

Message = dict[str, Any]
Block = dict[str, Any]

# Assistant blocks that carry the model's reasoning: kept opaque, byte for byte, on the chat
# message under THINKING_KEY (litellm's name for them).
THINKING_TYPES = ("thinking", "redacted_thinking")
THINKING_KEY = "thinking_blocks"
# Every other assistant block that is neither text nor tool_use (server_tool_use,
# web_search_tool_result, code execution results, …) rides along under PROVIDER_KEY.
PROVIDER_KEY = "provider_blocks"


@dataclass
class Piece:
    """Where one chat message came from.

    turn: the index of its Anthropic message in `messages` (-1 for the top-level `system`).
    snapshot: a copy of the chat message exactly as parsed (edits in place are detected; snapshot.py).
    blocks: the original Anthropic blocks (the same objects) this chat message stands for.
    parts: for user and system messages with list content, the chat part each block became
    (the snapshot's: as parsed).
    string: the original content was a plain string (blocks then holds no block).
    """

    turn: int
    snapshot: Message
    blocks: list[Block]
    parts: list[Any] = field(default_factory=list)
    string: bool = False


@dataclass
class ParsedRequest:
    """A Messages request in chat form.

    messages / tools / tool_choice / parallel_tool_calls: what the policies read and edit
    (tool_choice None when the body has none; parallel_tool_calls None unless the body's
    tool_choice sets disable_parallel_tool_use).
    server_tools: Anthropic's own tools (web search, code execution, …), forwarded untouched.
    pieces: per chat message in `messages`, where it came from.
    tool_origins: per chat tool, the Anthropic tool it came from.
    last_breakpoint: index in `messages` of the last message holding a cache_control
    breakpoint (-1: none); nothing up to it should change outside a compaction event.
    """

    messages: list[Message]
    tools: list[Message]
    tool_choice: Any
    parallel_tool_calls: bool | None
    server_tools: list[Block]
    pieces: list[Piece]
    tool_origins: list[Block]
    last_breakpoint: int = -1
    _tool_snapshots: list[Message] = field(default_factory=list, repr=False)


def parse_request(body: dict[str, Any]) -> ParsedRequest:
    """Convert a Messages request body into chat messages, chat tools and tool choice."""
    if not isinstance(body, dict):
        raise AnthropicWireError("the request body must be a JSON object")
    raw_messages = body.get("messages")
    if not isinstance(raw_messages, list):
        raise AnthropicWireError("`messages` must be a list of {role, content} objects")
    messages: list[Message] = []
    pieces: list[Piece] = []

    def add(turn: int, message: Message, blocks: list[Block], parts: list[Any] | None = None, string: bool = False) -> None:
        messages.append(message)
        snap = snapshot(message)  # its parts too: the message's own may be edited in place
        pieces.append(Piece(turn, snap, blocks, snap["content"] if parts else [], string))

    system = body.get("system")
    if isinstance(system, str):
        add(-1, {"role": "system", "content": system}, [], string=True)
    elif isinstance(system, list):
        parts = [_user_part(b) for b in system]
        add(-1, {"role": "system", "content": list(parts)}, list(system), parts)
    elif system is not None:
        raise AnthropicWireError("`system` must be a string or a list of text blocks")

    for turn, msg in enumerate(raw_messages):
        if not isinstance(msg, dict) or msg.get("role") not in ("user", "assistant"):
            raise AnthropicWireError(f"messages[{turn}] must be an object with role 'user' or 'assistant'")
        content = msg.get("content")
        if not isinstance(content, (str, list)):
            raise AnthropicWireError(f"messages[{turn}].content must be a string or a list of blocks")
        if msg["role"] == "assistant":
            _parse_assistant(turn, content, add)
        else:
            _parse_user(turn, content, add)

    tools, origins, server_tools = parse_tools(body.get("tools"))
    tool_choice, parallel = parse_tool_choice(body.get("tool_choice"))
    parsed = ParsedRequest(messages, tools, tool_choice, parallel, server_tools, pieces, origins)
    parsed._tool_snapshots = [tool_snapshot(t) for t in tools]
    parsed.last_breakpoint = max(
        (i for i, p in enumerate(pieces) if any(isinstance(b, dict) and b.get("cache_control") for b in p.blocks)),
        default=-1,
    )
    return parsed


def _parse_user(turn: int, content: str | list[Any], add: Any) -> None:
    if isinstance(content, str):
        add(turn, {"role": "user", "content": content}, [], string=True)
        return
    others: list[Block] = []
    for block in content:
        if not isinstance(block, dict):
            raise AnthropicWireError(f"messages[{turn}].content holds a non-object block")
        if block.get("type") == "tool_result":
            if not isinstance(block.get("tool_use_id"), str):
                raise AnthropicWireError(f"messages[{turn}]: a tool_result needs a string `tool_use_id`")
            tool = {"role": "tool", "tool_call_id": block.get("tool_use_id", ""), "content": tool_result_text(block)}
            add(turn, tool, [block])
        else:
            others.append(block)
    if others:
        parts = [_user_part(b) for b in others]
        add(turn, {"role": "user", "content": list(parts)}, others, parts)


def _parse_assistant(turn: int, content: str | list[Any], add: Any) -> None:
    if isinstance(content, str):
        add(turn, {"role": "assistant", "content": content}, [], string=True)
        return
    texts: list[str] = []
    calls: list[Message] = []
    thinking: list[Block] = []
    provider: list[Block] = []
    for block in content:
        if not isinstance(block, dict):
            raise AnthropicWireError(f"messages[{turn}].content holds a non-object block")
        kind = block.get("type")
        if kind == "text":
            texts.append(str(block.get("text", "")))
        elif kind == "tool_use":
            if not isinstance(block.get("id"), str) or not isinstance(block.get("name"), str):
                raise AnthropicWireError(f"messages[{turn}]: a tool_use block needs a string `id` and `name`")
            calls.append(tool_call_of(block))
        elif kind in THINKING_TYPES:
            thinking.append(block)
        else:
            provider.append(block)
    message: Message = {"role": "assistant", "content": "".join(texts) if texts else None}
    if calls:
        message["tool_calls"] = calls
    if thinking:
        message[THINKING_KEY] = list(thinking)
    if provider:
        message[PROVIDER_KEY] = list(provider)
    add(turn, message, list(content))


def tool_call_of(block: Block) -> Message:
    """A tool_use block as a chat tool call (arguments: the input as JSON text)."""
    arguments = json.dumps(block.get("input", {}), ensure_ascii=False)
    return {"id": block.get("id", ""), "type": "function", "function": {"name": block.get("name", ""), "arguments": arguments}}


def tool_result_text(block: Block) -> str:
    """A tool_result's content as text: the string, or its blocks' text (other blocks as [type])."""
    content = block.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise AnthropicWireError("a tool_result's content must be a string or a list of blocks")
    return "\n".join(str(b.get("text", "")) if b.get("type") == "text" else f"[{b.get('type')}]" for b in content if isinstance(b, dict))


def _user_part(block: Any) -> Any:
    """One user (or system) block as a chat content part. Text → text part; an image → an
    image_url part (data: URL for base64, the URL for url sources); anything else (documents,
    search results, file images, …) stays the Anthropic block itself, which content_text shows
    as `[its type]`."""
    if not isinstance(block, dict):
        raise AnthropicWireError("a content block must be an object")
    kind = block.get("type")
    if not isinstance(kind, str) or kind in ("", "input_audio", "audio", "file", "input_image", "refusal"):
        raise AnthropicWireError(f"a content block of type {kind!r} is not a Messages API block")  # render has no form for it
    if kind == "text":
        return {"type": "text", "text": block.get("text", "")}
    if kind == "image":
        source = block.get("source") or {}
        if source.get("type") == "base64":
            url = f"data:{source.get('media_type', '')};base64,{source.get('data', '')}"
            return {"type": "image_url", "image_url": {"url": url}}
        if source.get("type") == "url":
            return {"type": "image_url", "image_url": {"url": source.get("url", "")}}
    return dict(block)
