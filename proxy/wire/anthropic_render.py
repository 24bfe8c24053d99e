"""The policies' edited chat conversation → a Messages request body again.

Unchanged chat messages go back as the very blocks they came from (cache_control, thinking
signatures and citations byte for byte); the chat messages of one Anthropic turn regroup into
that turn; changed and new messages are converted; adjacent turns of one role are merged so that
roles alternate. A body nothing changed in comes back as the same object.
"""

from __future__ import annotations

import json
from typing import Any

from .anthropic_parse import (
    PROVIDER_KEY,
    THINKING_KEY,
    THINKING_TYPES,
    Block,
    Message,
    ParsedRequest,
    Piece,
    tool_call_of,
)
from .anthropic_tools import UNCHANGED, AnthropicWireError, render_tool_choice, render_tools


def render_request(
    body: dict[str, Any],
    parsed: ParsedRequest,
    messages: list[Message],
    tools: list[Message] | None = None,
    tool_choice: Any = UNCHANGED,
    parallel_tool_calls: Any = UNCHANGED,
) -> dict[str, Any]:
    """The Messages body for `messages` / `tools` / `tool_choice` (chat form, as edited).

    Every other field (model, max_tokens, stream, metadata, thinking, …) is kept as it is.
    `tools` None means unchanged. Returns `body` itself when nothing changed, so the caller can
    forward the client's bytes."""
    out = dict(body)
    changed = False
    n_sys = 0
    while n_sys < len(messages) and messages[n_sys].get("role") in ("system", "developer"):
        n_sys += 1
    src, same = _match(messages, parsed.pieces)

    system = _render_system(body, parsed, messages[:n_sys], src[:n_sys], same[:n_sys])
    if system is not UNCHANGED:
        changed = True
        if system is None:
            out.pop("system", None)
        else:
            out["system"] = system

    rendered, intact = _render_turns(body, parsed, messages[n_sys:], src[n_sys:], same[n_sys:])
    if not intact:
        out["messages"] = rendered
        changed = True

    if tools is not None:
        new_tools = render_tools(body, parsed, tools)
        if new_tools is not UNCHANGED:
            out["tools"] = new_tools
            changed = True

    choice = render_tool_choice(body, parsed, tool_choice, parallel_tool_calls)
    if choice is not UNCHANGED:
        changed = True
        if choice is None:
            out.pop("tool_choice", None)
        else:
            out["tool_choice"] = choice
    return out if changed else body


# ----------------------------------------------------------------------------- matching


def _match(messages: list[Message], pieces: list[Piece]) -> tuple[list[int | None], list[bool]]:
    """Per chat message: the piece it came from (or None: new) and whether it is unchanged.

    Unchanged messages are found by value, in order (a message equal to its parsed snapshot).
    A changed message takes as origin the first unclaimed piece of the same role between its
    unchanged neighbours' pieces: that is how a note appended to a user turn keeps the turn's
    own blocks."""
    src: list[int | None] = [None] * len(messages)
    same = [False] * len(messages)
    used = [False] * len(pieces)
    index: dict[str, list[int]] | None = None
    pointer = 0
    for i, message in enumerate(messages):
        if pointer < len(pieces) and message == pieces[pointer].snapshot:
            found: int | None = pointer
        else:
            if index is None:  # the pointer only rises: pieces before it are never found again
                index = {}
                for p in range(pointer, len(pieces)):
                    index.setdefault(_key(pieces[p].snapshot), []).append(p)
            found = next((p for p in index.get(_key(message), []) if p >= pointer and not used[p]), None)
        if found is not None:
            src[i], same[i], used[found] = found, True, True
            pointer = found + 1
    nxt = len(pieces)
    upper = [0] * len(messages)
    for i in range(len(messages) - 1, -1, -1):
        upper[i] = nxt
        if same[i]:
            nxt = src[i]  # type: ignore[assignment]
    low = -1
    for i, message in enumerate(messages):
        if same[i]:
            low = src[i]  # type: ignore[assignment]
            continue
        role = message.get("role")
        for p in range(low + 1, upper[i]):
            if not used[p] and pieces[p].snapshot.get("role") == role:
                src[i], used[p], low = p, True, p
                break
    return src, same


def _key(message: Message) -> str:
    return json.dumps(message, sort_keys=True, ensure_ascii=False, default=str)


# ----------------------------------------------------------------------------- system


def _render_system(body: dict[str, Any], parsed: ParsedRequest, msgs: list[Message], src: list[int | None], same: list[bool]) -> Any:
    """UNCHANGED, None (no system any more), a string or a list of text blocks."""
    had = "system" in body
    if not msgs:
        return None if had else UNCHANGED
    if len(msgs) == 1 and same[0] and parsed.pieces[src[0]].turn == -1:  # type: ignore[index]
        return UNCHANGED
    if len(msgs) == 1 and isinstance(msgs[0].get("content"), str):
        return msgs[0]["content"]
    blocks: list[Block] = []
    for message, p in zip(msgs, src):
        piece = parsed.pieces[p] if p is not None else None
        blocks.extend(_content_blocks(message.get("content"), piece))
    for block in blocks:
        if block.get("type") != "text":
            raise AnthropicWireError(f"a system prompt holds only text; found a {block.get('type')!r} part")
    return blocks


# ----------------------------------------------------------------------------- turns


class _Turn:
    __slots__ = ("role", "turn", "content", "original")

    def __init__(self, role: str, turn: int | None, content: str | list[Block], original: bool) -> None:
        self.role, self.turn, self.content, self.original = role, turn, content, original

    def blocks(self) -> list[Block]:
        if isinstance(self.content, str):
            return [{"type": "text", "text": self.content}] if self.content else []
        return self.content


def _render_turns(
    body: dict[str, Any], parsed: ParsedRequest, msgs: list[Message], src: list[int | None], same: list[bool]
) -> tuple[list[Message], bool]:
    """The `messages` array, and whether it is exactly the body's own."""
    pieces = parsed.pieces
    originals = body.get("messages") or []
    if all(same):  # fast path: every turn's pieces, all unchanged and in order, is the body's own array
        order = [p for p, piece in enumerate(pieces) if piece.turn >= 0]
        if src == order and len({pieces[p].turn for p in order}) == len(originals):
            return originals, True
    groups: list[tuple[str, int | None, list[int]]] = []
    for i, message in enumerate(msgs):
        role = "assistant" if message.get("role") == "assistant" else "user"
        turn = pieces[src[i]].turn if src[i] is not None else None  # type: ignore[index]
        if groups and turn is not None and groups[-1][1] == turn and groups[-1][0] == role:
            groups[-1][2].append(i)
        else:
            groups.append((role, turn, [i]))

    by_turn: dict[int, list[int]] = {}  # turn → its pieces' indices
    for p, piece in enumerate(pieces):
        by_turn.setdefault(piece.turn, []).append(p)
    turns: list[_Turn] = []
    for role, turn, items in groups:
        if turn is not None and all(same[i] for i in items) and [src[i] for i in items] == by_turn.get(turn, []):
            turns.append(_Turn(role, turn, originals[turn].get("content"), True))
            continue
        content = _group_content(role, [(msgs[i], pieces[src[i]] if src[i] is not None else None, same[i]) for i in items])  # type: ignore[index]
        if content:
            turns.append(_Turn(role, turn, content, False))

    merged: list[_Turn] = []
    for t in turns:
        prev = merged[-1] if merged else None
        if prev is None or prev.role != t.role or (prev.turn is not None and t.turn == prev.turn + 1):
            merged.append(t)
            continue
        blocks = [*prev.blocks(), *t.blocks()]
        if t.role == "user":  # tool results first: they must answer the assistant turn before
            blocks = [b for b in blocks if b.get("type") == "tool_result"] + [b for b in blocks if b.get("type") != "tool_result"]
        merged[-1] = _Turn(t.role, None, blocks, False)

    intact = len(merged) == len(originals) and all(t.original and t.turn == k for k, t in enumerate(merged))
    if intact:
        return originals, True
    return [originals[t.turn] if t.original else {"role": t.role, "content": t.content} for t in merged], False  # type: ignore[index]


def _group_content(role: str, items: list[tuple[Message, Piece | None, bool]]) -> str | list[Block]:
    """One Anthropic turn's content from its chat messages: a string where one plain message
    stands alone, else blocks (tool results first)."""
    if len(items) == 1:
        message, piece, unchanged = items[0]
        if unchanged and piece is not None and piece.string:
            return piece.snapshot.get("content") or ""
        plain = message.get("role") != "tool" and not any(message.get(k) for k in ("tool_calls", THINKING_KEY, PROVIDER_KEY))
        if plain and isinstance(message.get("content"), str) and (piece is None or piece.string):
            return message["content"]
    blocks: list[Block] = []
    for message, piece, unchanged in items:
        blocks.extend(_message_blocks(message, piece, unchanged))
    if role == "user":
        blocks = [b for b in blocks if b.get("type") == "tool_result"] + [b for b in blocks if b.get("type") != "tool_result"]
    return blocks


def _message_blocks(message: Message, piece: Piece | None, unchanged: bool) -> list[Block]:
    if unchanged and piece is not None:
        if piece.string:
            text = piece.snapshot.get("content") or ""
            return [{"type": "text", "text": text}] if text else []
        return list(piece.blocks)
    role = message.get("role")
    if role == "tool":
        return [_tool_result_block(message, piece)]
    if role == "assistant":
        return _assistant_blocks(message, piece)
    return _content_blocks(message.get("content"), piece)


def _tool_result_block(message: Message, piece: Piece | None) -> Block:
    content = message.get("content")
    value: Any = content if isinstance(content, str) or content is None else _content_blocks(content, None)
    origin = piece.blocks[0] if piece is not None and piece.blocks and piece.blocks[0].get("type") == "tool_result" else None
    block: Block = dict(origin) if origin is not None else {"type": "tool_result"}
    block["tool_use_id"] = message.get("tool_call_id", "")
    block["content"] = value if value is not None else ""
    return block


def _content_blocks(content: Any, piece: Piece | None) -> list[Block]:
    """User or system content as blocks; parts equal to the origin's parts go back as the
    origin's blocks, and an edited part keeps the cache_control of the block it replaces."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    parts = piece.parts if piece is not None and not piece.string else []
    used = [False] * len(parts)
    out: list[Block] = []
    k = 0
    for pos, part in enumerate(content):
        j = next((j for j in range(k, len(parts)) if not used[j] and parts[j] == part), None)
        if j is not None:
            used[j], k = True, j + 1
            out.append(piece.blocks[j])  # type: ignore[union-attr]
            continue
        block = part_to_block(part)
        if pos < len(parts) and not used[pos]:
            origin = piece.blocks[pos]  # type: ignore[union-attr]
            if origin.get("type") == block.get("type") and origin.get("cache_control") and "cache_control" not in block:
                block = {**block, "cache_control": origin["cache_control"]}
        out.append(block)
    return out


def part_to_block(part: Any) -> Block:
    """A chat content part as an Anthropic block (opaque Anthropic blocks pass as they are)."""
    if isinstance(part, str):
        return {"type": "text", "text": part}
    if not isinstance(part, dict):
        raise AnthropicWireError("a content part must be an object")
    kind = part.get("type")
    if kind == "text":
        return {"type": "text", "text": str(part.get("text", ""))}
    if kind == "image_url":
        image = part.get("image_url")
        url = image.get("url", "") if isinstance(image, dict) else str(image or "")
        if url.startswith("data:") and ";base64," in url:
            media_type, data = url[5:].split(";base64,", 1)
            return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}
        return {"type": "image", "source": {"type": "url", "url": url}}
    if kind in ("input_audio", "audio", "file", "input_image", "refusal") or not kind:
        raise AnthropicWireError(f"a {kind!r} content part has no Anthropic equivalent")
    return part


def _assistant_blocks(message: Message, piece: Piece | None) -> list[Block]:
    """An edited assistant message: the origin's blocks in their order where they still hold
    (thinking with its signature, text, tool_use), then what is new."""
    content = message.get("content")
    if isinstance(content, list):
        text = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    else:
        text = content or ""
    thinking = list(message.get(THINKING_KEY) or [])
    provider = list(message.get(PROVIDER_KEY) or [])
    calls = list(message.get("tool_calls") or [])
    origin = piece.blocks if piece is not None and not piece.string else []
    origin_text = "".join(str(b.get("text", "")) for b in origin if b.get("type") == "text")
    out: list[Block] = []
    text_done = not text
    for block in origin:
        kind = block.get("type")
        pool = thinking if kind in THINKING_TYPES else provider if kind not in ("text", "tool_use") else None
        if pool is not None:
            if block in pool:
                pool.remove(block)
                out.append(block)
        elif kind == "text":
            if text == origin_text:
                out.append(block)
                text_done = True
            elif not text_done:
                out.append({"type": "text", "text": text})
                text_done = True
        else:
            call = tool_call_of(block)
            if call in calls:
                calls.remove(call)
                out.append(block)
    if not text_done:
        at = next((n for n, b in enumerate(out) if b.get("type") == "tool_use"), len(out))
        out.insert(at, {"type": "text", "text": text})
    return [*thinking, *out, *provider, *(_tool_use_block(c) for c in calls)]


def _tool_use_block(call: Message) -> Block:
    function = call.get("function") or {}
    arguments = function.get("arguments") or "{}"
    try:
        value = json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError as exc:
        raise AnthropicWireError(f"tool call {call.get('id')!r}: arguments are not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise AnthropicWireError(f"tool call {call.get('id')!r}: arguments must be a JSON object")
    return {"type": "tool_use", "id": call.get("id", ""), "name": function.get("name", ""), "input": value}
