"""The three agent APIs for the benches: a chat-completions request as a Responses or Messages body,
the answer of each API read back in chat form, and a chat answer written in each API's shape.

    body = request_body("messages", {"model": m, "messages": history, "tools": TOOLS})
    response = client.post(PATH["messages"], json=body, headers=HEADERS["messages"])
    message, usage = read_answer("messages", response.json())   # chat form: content, tool_calls

The model side (a scripted upstream answering all three APIs) reads what it received with the
proxy's own parsers (`conversation`), so its logic is written once, in chat form, and answers with
`answer_body`. Pure functions, no I/O.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ctxwarden.proxy.wire import anthropic as anthropic_wire
from ctxwarden.proxy.wire import responses as responses_wire
from ctxwarden.proxy.wire.responses_parse import responses_choice

APIS = ("chat", "responses", "messages")
PATH = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}
HEADERS = {"chat": {}, "responses": {}, "messages": {"anthropic-version": "2023-06-01", "x-api-key": "sk-bench"}}
MAX_TOKENS = 1024  # the Messages API requires it


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") in ("text", "input_text", "output_text"))


# ----------------------------------------------------------------------------- requests


def request_body(api: str, chat: dict[str, Any]) -> dict[str, Any]:
    """`chat` (model, messages, tools, stream, …) as the same request in `api`'s shape."""
    if api == "chat":
        return chat
    if api == "responses":
        return to_responses(chat)
    if api == "messages":
        return to_messages(chat)
    raise ValueError(f"unknown API {api!r}")


def _leading_system(messages: list[dict[str, Any]]) -> tuple[str | None, list[dict[str, Any]]]:
    n = 0
    while n < len(messages) and messages[n].get("role") in ("system", "developer"):
        n += 1
    if not n:
        return None, messages
    return "\n\n".join(_text(m.get("content")) for m in messages[:n]), messages[n:]


def to_responses(chat: dict[str, Any]) -> dict[str, Any]:
    """instructions + input items (message, function_call, function_call_output) + function tools."""
    instructions, rest = _leading_system(chat.get("messages") or [])
    items: list[dict[str, Any]] = []
    for m in rest:
        role = m.get("role")
        if role == "tool":
            items.append({"type": "function_call_output", "call_id": m.get("tool_call_id", ""), "output": _text(m.get("content"))})
        elif role == "assistant":
            text = _text(m.get("content"))
            if text:
                items.append({"type": "message", "role": "assistant",
                              "content": [{"type": "output_text", "text": text, "annotations": []}]})
            for call in m.get("tool_calls") or []:
                fn = call.get("function") or {}
                items.append({"type": "function_call", "call_id": call.get("id", ""), "name": fn.get("name", ""),
                              "arguments": fn.get("arguments") or "{}"})
        else:  # user, or a system message after the first turn
            items.append({"type": "message", "role": role, "content": _text(m.get("content"))})
    out: dict[str, Any] = {"model": chat["model"]}
    if instructions is not None:
        out["instructions"] = instructions
    out["input"] = items
    if chat.get("tools") is not None:
        out["tools"] = [responses_wire.responses_tool(t) for t in chat["tools"]]
    for key in ("stream", "temperature"):
        if key in chat:
            out[key] = chat[key]
    if "tool_choice" in chat:
        out["tool_choice"] = responses_choice(chat["tool_choice"])
    if "max_tokens" in chat:
        out["max_output_tokens"] = chat["max_tokens"]
    return out


def to_messages(chat: dict[str, Any]) -> dict[str, Any]:
    """system + alternating user/assistant turns (tool_use / tool_result blocks) + custom tools."""
    system, rest = _leading_system(chat.get("messages") or [])
    turns: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": list(blocks)})

    for m in rest:
        role = m.get("role")
        if role == "tool":
            add("user", [{"type": "tool_result", "tool_use_id": m.get("tool_call_id", ""), "content": _text(m.get("content"))}])
        elif role == "assistant":
            blocks: list[dict[str, Any]] = []
            text = _text(m.get("content"))
            if text:
                blocks.append({"type": "text", "text": text})
            for call in m.get("tool_calls") or []:
                fn = call.get("function") or {}
                blocks.append({"type": "tool_use", "id": call.get("id", ""), "name": fn.get("name", ""),
                               "input": json.loads(fn.get("arguments") or "{}")})
            add("assistant", blocks or [{"type": "text", "text": ""}])
        else:
            add("user", [{"type": "text", "text": _text(m.get("content"))}])
    # A user turn of one text block is sent as a plain string, as SDK users write it.
    for turn in turns:
        if turn["role"] == "user" and len(turn["content"]) == 1 and turn["content"][0]["type"] == "text":
            turn["content"] = turn["content"][0]["text"]
    out: dict[str, Any] = {"model": chat["model"], "max_tokens": chat.get("max_tokens", MAX_TOKENS)}
    if system is not None:
        out["system"] = system
    out["messages"] = turns
    if chat.get("tools") is not None:
        out["tools"] = [anthropic_wire.tool_from_chat(t) for t in chat["tools"]]
    if "stream" in chat:
        out["stream"] = chat["stream"]
    return out


# ----------------------------------------------------------------------------- answers


def read_answer(api: str, data: dict[str, Any]) -> tuple[dict[str, Any], dict[str, int]]:
    """The assistant message (role, content, tool_calls: chat form) and usage (prompt/completion tokens)."""
    if api == "chat":
        message = data["choices"][0]["message"]
        usage = data.get("usage") or {}
        return ({k: message[k] for k in ("role", "content", "tool_calls") if k in message},
                {"prompt_tokens": usage.get("prompt_tokens", 0), "completion_tokens": usage.get("completion_tokens", 0)})
    if api == "responses":
        text = responses_wire.answer_text(data)
        calls = [{"id": c.get("call_id"), "type": "function",
                  "function": {"name": c.get("name"), "arguments": c.get("arguments") or "{}"}}
                 for c in responses_wire.calls_in_answer(data)]
        usage = data.get("usage") or {}
        tokens = {"prompt_tokens": usage.get("input_tokens", 0), "completion_tokens": usage.get("output_tokens", 0)}
    elif api == "messages":
        text = anthropic_wire.answer_text(data)
        calls = [{"id": b.get("id"), "type": "function",
                  "function": {"name": b.get("name"), "arguments": json.dumps(b.get("input", {}))}}
                 for b in anthropic_wire.tool_uses_in_answer(data)]
        usage = data.get("usage") or {}
        tokens = {"prompt_tokens": usage.get("input_tokens", 0), "completion_tokens": usage.get("output_tokens", 0)}
    else:
        raise ValueError(f"unknown API {api!r}")
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = calls
    return message, tokens


# ----------------------------------------------------------------------------- the model's side


def conversation(api: str, body: dict[str, Any]) -> dict[str, Any]:
    """What a model received, in chat form ({messages, tools}), read with the proxy's own parsers."""
    if api == "chat":
        return {"messages": body.get("messages") or [], "tools": body.get("tools")}
    parsed = (responses_wire if api == "responses" else anthropic_wire).parse_request(body)
    return {"messages": parsed.messages, "tools": parsed.tools}


def answer_body(api: str, message: dict[str, Any], model: str, usage: dict[str, int] | None = None) -> dict[str, Any]:
    """A chat assistant message (content, tool_calls) as `api`'s non-streamed answer."""
    usage = usage or {"prompt_tokens": 0, "completion_tokens": 0}
    calls = message.get("tool_calls") or []
    text = _text(message.get("content"))
    if api == "chat":
        return {"id": "chatcmpl-bench", "object": "chat.completion", "created": int(time.time()), "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
                "usage": {**usage, "total_tokens": sum(usage.values())}}
    if api == "responses":
        output: list[dict[str, Any]] = []
        if text:
            output.append(responses_wire.output_message("msg_bench", text))
        output += [{"type": "function_call", "id": f"fc_{c['id']}", "call_id": c["id"], "name": c["function"]["name"],
                    "arguments": c["function"]["arguments"], "status": "completed"} for c in calls]
        return {"id": "resp_bench", "object": "response", "created_at": int(time.time()), "status": "completed",
                "error": None, "incomplete_details": None, "model": model, "output": output,
                "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "text": {"format": {"type": "text"}},
                "usage": {"input_tokens": usage["prompt_tokens"], "output_tokens": usage["completion_tokens"],
                          "total_tokens": sum(usage.values()), "input_tokens_details": {"cached_tokens": 0},
                          "output_tokens_details": {"reasoning_tokens": 0}}}
    if api == "messages":
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        blocks += [{"type": "tool_use", "id": c["id"], "name": c["function"]["name"],
                    "input": json.loads(c["function"]["arguments"] or "{}")} for c in calls]
        return {"id": "msg_bench", "type": "message", "role": "assistant", "model": model, "content": blocks,
                "stop_reason": "tool_use" if calls else "end_turn", "stop_sequence": None,
                "usage": {"input_tokens": usage["prompt_tokens"], "output_tokens": usage["completion_tokens"]}}
    raise ValueError(f"unknown API {api!r}")


def cached_part(api: str, body: dict[str, Any]) -> tuple[str, list[Any]]:
    """A forwarded request split as a provider's prompt cache sees it: the fixed head (instructions /
    system, tools) as one key, and the conversation (messages / input items / turns) as a list."""
    if api == "chat":
        return json.dumps(body.get("tools"), sort_keys=True), list(body.get("messages") or [])
    if api == "responses":
        head = json.dumps([body.get("instructions"), body.get("tools")], sort_keys=True)
        items = body.get("input")
        return head, [{"role": "user", "content": items}] if isinstance(items, str) else list(items or [])
    head = json.dumps([body.get("system"), body.get("tools")], sort_keys=True)
    return head, list(body.get("messages") or [])


def extends(api: str, previous: dict[str, Any], current: dict[str, Any]) -> bool:
    """`current` starts with `previous` as the API sends it: same head, every earlier item unchanged."""
    head_a, a = cached_part(api, previous)
    head_b, b = cached_part(api, current)
    if head_a != head_b or len(b) < len(a):
        return False
    return all(json.dumps(x, sort_keys=True) == json.dumps(y, sort_keys=True) for x, y in zip(a, b))
