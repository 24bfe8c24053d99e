"""Writing the policies' conversation back as a Responses API request body.

Unchanged messages go back as their original input items (the same dicts, hence the same bytes,
riders included); changed and new ones are converted, reusing every original call, result and
content part that is still the same. A reasoning item goes back only before its own follower,
unchanged; other riders stay with their message.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from .responses_parse import (
    Item,
    Message,
    ParsedRequest,
    Tool,
    chat_tool_message,
    item_kind,
    json_key,
    part_origins,
    responses_choice,
    responses_tool,
)

UNCHANGED: Any = object()  # render_request's tool_choice default: keep the client's
SAME: Any = object()  # _render_input: the body's `input` stays as it is


def render_request(body: dict[str, Any], parsed: ParsedRequest, messages: list[Message],
                   tools: list[Tool] | None, tool_choice: Any = UNCHANGED) -> dict[str, Any]:
    """The Responses body for the policies' conversation: `body` with `instructions`, `input`,
    `tools` and `tool_choice` rewritten where they changed, every other field as it is.

    `messages` and `tools` are chat form (as in `parsed`); `tool_choice` too, or UNCHANGED.
    """
    out = dict(body)
    messages = list(messages)
    if parsed.instructions:
        if messages and messages[0].get("role") in ("system", "developer"):
            first = messages.pop(0)
            if not _same(first, parsed.snapshots[0]):
                out["instructions"] = _plain_text(first.get("content"))
        else:
            out.pop("instructions", None)
    rendered = _render_input(parsed, messages)
    if rendered is not SAME:
        out["input"] = rendered
    _render_tools(out, parsed, tools)
    if tool_choice is not UNCHANGED and json_key(tool_choice) != parsed.tool_choice_key and "tools" in out:
        if tool_choice is None:
            out.pop("tool_choice", None)
        else:
            out["tool_choice"] = responses_choice(tool_choice)
    return out


def _plain_text(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return content if isinstance(content, str) else ""


def _same(value: Any, snapshot: Any) -> bool:
    """Whether `value` is `snapshot`'s value: == (in C, quick on the shared strings of an unchanged
    message), else the same canonical JSON (a tuple where the snapshot has a list)."""
    return value == snapshot or json_key(value) == json_key(snapshot)


def _match(parsed: ParsedRequest, messages: list[Message]) -> list[int | None]:
    """For each edited message, the parsed message it equals (the first one after the last match),
    or None. Messages still in place cost one == each; JSON keys only for the others."""
    snapshots = parsed.snapshots
    n = len(snapshots)
    positions: dict[str, list[int]] | None = None  # json_key → parsed indices ≥ the floor at the first miss
    matched: list[int | None] = []
    floor = int(parsed.instructions)
    for message in messages:
        if floor < n and message == snapshots[floor]:
            matched.append(floor)
            floor += 1
            continue
        if positions is None:  # the floor only rises: later matches are never below it
            positions = {}
            for k in range(n - 1, floor - 1, -1):
                positions.setdefault(json_key(snapshots[k]), []).append(k)
        stack = positions.get(json_key(message), [])
        while stack and stack[-1] < floor:
            stack.pop()
        if stack:
            floor = stack.pop() + 1
            matched.append(floor - 1)
        else:
            matched.append(None)
    return matched


def _pair_changed(parsed: ParsedRequest, messages: list[Message], matched: list[int | None]) -> list[int | None]:
    """For each changed message, the parsed message it was edited from: the next one of the same
    role in the same gap between unchanged messages; None for a new message. Linear: matches
    increase, so every parsed message inside a gap is unmatched."""
    pairs: list[int | None] = [None] * len(messages)
    anchors = [(e, k) for e, k in enumerate(matched) if k is not None] + [(len(messages), len(parsed.snapshots))]
    last_e, last_k = -1, int(parsed.instructions) - 1
    for next_e, next_k in anchors:
        waiting: dict[str, deque[int]] = {}
        for k in range(last_k + 1, next_k):
            waiting.setdefault(str(parsed.roles[k]), deque()).append(k)
        for e in range(last_e + 1, next_e):
            queue = waiting.get(str(messages[e].get("role")))
            if queue:
                pairs[e] = queue.popleft()
        last_e, last_k = next_e, next_k
    return pairs


def _render_input(parsed: ParsedRequest, messages: list[Message]) -> Any:
    matched = _match(parsed, messages)
    if None not in matched and len(matched) == len(parsed.snapshots) - int(parsed.instructions):
        return SAME
    pairs = _pair_changed(parsed, messages, matched)
    items = [parsed.items[i] for i in parsed.orphans]
    for message, k, pair in zip(messages, matched, pairs):
        if k is not None:
            items += [parsed.items[i] for i in parsed.sources[k]]
        else:
            items += _with_riders(_to_items(message, parsed), parsed, pair)
    if parsed.string_input and len(items) == 1 and items[0].get("role") == "user":
        if isinstance(items[0].get("content"), str):
            return items[0]["content"]  # still one plain user turn: keep the client's string form
    return items


def _with_riders(new: list[Item], parsed: ParsedRequest, pair: int | None) -> list[Item]:
    """`new` (a changed message's items) with the riders of the message it was edited from.

    A rider goes just before the item it preceded when that item is still there as it was, else
    before the message (trailing ones after it). A reasoning item goes only if the item right
    after it goes too: it belongs to that item, and the API refuses either without the other.
    """
    if pair is None:
        return new
    kept = {id(item) for item in new}
    sources = [parsed.items[i] for i in parsed.sources[pair]]
    goes = [False] * len(sources)
    following = False  # whether the item after the current one goes (nothing after: no)
    for n in range(len(sources) - 1, -1, -1):
        item = sources[n]
        if item_kind(item) != "rider":
            following = id(item) in kept
        elif item.get("type") != "reasoning":
            following = True
        goes[n] = following
    before: dict[int, list[Item]] = {}
    lead: list[Item] = []
    riders: list[Item] = []
    for item, going in zip(sources, goes):
        if item_kind(item) == "rider":
            riders += [item] if going else []
            continue
        if id(item) in kept:
            before[id(item)] = riders
        else:
            lead += riders
        riders = []
    out = lead
    for item in new:
        out += [*before.get(id(item), []), item]
    return out + riders


def _to_items(message: Message, parsed: ParsedRequest) -> list[Item]:
    """A changed or new chat message as Responses items, reusing original calls, results and
    content parts that are still the same."""
    role = message.get("role")
    if role == "tool":
        call_id = message.get("tool_call_id")
        original = parsed.outputs.get(call_id)
        if original is not None and chat_tool_message(original) == message:
            return [original]
        content = message.get("content")
        output = [_input_part(p, "tool", parsed) for p in content] if isinstance(content, list) else content
        return [{"type": "function_call_output", "call_id": call_id, "output": output if output is not None else ""}]
    items: list[Item] = []
    content = message.get("content")
    if content not in (None, "", []) or not message.get("tool_calls"):
        if role == "assistant" and isinstance(content, list) and all(_is_text(p) for p in content):
            content = "".join(p["text"] for p in content)  # the form every Responses server takes
        elif isinstance(content, list):
            content = [_input_part(p, role, parsed) for p in content]
        items.append({"type": "message", "role": role, "content": content if content is not None else ""})
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        original = parsed.calls.get(call.get("id"))
        if original is not None and (original.get("name"), original.get("arguments")) == (
                function.get("name"), function.get("arguments")):
            items.append(original)
        else:
            items.append({"type": "function_call", "call_id": call.get("id"), "name": function.get("name"),
                          "arguments": function.get("arguments") or ""})
    return items


def _is_text(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)


def _input_part(part: Any, role: Any, parsed: ParsedRequest) -> Any:
    """A chat content part as a Responses one: the original part when it is the same, else
    text → input_text (output_text for the assistant), image_url → input_image, others as they are."""
    if not isinstance(part, dict):
        return part
    original = part_origins(parsed).get((role == "assistant", json_key(part)))
    if original is not None:
        return original
    if part.get("type") == "text":
        if role == "assistant":
            return {"type": "output_text", "text": part.get("text", ""), "annotations": []}
        return {"type": "input_text", "text": part.get("text", "")}
    if part.get("type") == "image_url":
        image = part.get("image_url")
        url, detail = (image.get("url"), image.get("detail")) if isinstance(image, dict) else (image, None)
        return {"type": "input_image", "image_url": url, "detail": detail or "auto"}
    return part


def _render_tools(out: dict[str, Any], parsed: ParsedRequest, tools: list[Tool] | None) -> None:
    """`tools` written into `out` (see render_tools); no tools left → no `tools`, `tool_choice` or
    `parallel_tool_calls`."""
    rendered = render_tools(parsed, tools)
    if rendered is UNCHANGED:
        return
    if rendered:
        out["tools"] = rendered
    else:
        out.pop("tools", None)
        out.pop("tool_choice", None)
        out.pop("parallel_tool_calls", None)


def render_tools(parsed: ParsedRequest, tools: list[Tool] | None) -> Any:
    """The Responses `tools` for the policies' list (chat form): UNCHANGED when it is the parsed
    one; else the hosted tools first, as they were and in their order, then the function tools in
    the policies' order, a kept one in its original form, a new one converted. The policies' order
    is the session's append-only list: a tool found later (find_tools) comes last, never back at its
    place in the client's list, which would change the cached prefix of `tools`."""
    tools = list(tools or [])
    snapshots = parsed.tool_snapshots
    if len(tools) == len(snapshots) and all(_same(t, s) for t, s in zip(tools, snapshots)):
        return UNCHANGED
    kept: set[str] = set()
    result = list(parsed.hosted_tools)
    for tool in tools:
        name = (tool.get("function") or {}).get("name") if isinstance(tool.get("function"), dict) else None
        known = parsed.function_tools.get(name) if isinstance(name, str) else None
        if known is not None and _same(tool, known[1]) and name not in kept:
            kept.add(name)
            result.append(known[0])
        else:
            result.append(responses_tool(tool))
    return result

