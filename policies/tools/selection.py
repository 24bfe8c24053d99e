"""Which tools a request needs: its intent, the tools it must keep, and the per-session memory
that keeps a selection stable while the user's request is unchanged (cache-stable prefixes)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..cache import LRU, stable_hash
from ..messages import Message, content_text, last_user_index

# The intent is embedded on every new user request: a contextual embedder (minilm) costs ~0.35 ms
# per token on one core, so the text is bounded (~250 + ~120 tokens); the request comes first.
MAX_USER_CHARS = 1000
MAX_TURN_CHARS = 500  # the latest assistant/tool turn: what the agent is doing right now


def intent_text(messages: Sequence[Message]) -> str:
    """The current intent: the last user message, plus the latest assistant/tool turn after it
    when the agent is mid-task (its calls, their arguments and results say what comes next)."""
    i = last_user_index(messages)
    user = content_text(messages[i])[:MAX_USER_CHARS] if i >= 0 else ""
    turn = latest_turn_text(messages[i + 1 :])[:MAX_TURN_CHARS]
    return "\n".join(part for part in (user, turn) if part.strip())


def latest_turn_text(messages: Sequence[Message]) -> str:
    start = next((j for j in range(len(messages) - 1, -1, -1) if messages[j].get("role") == "assistant"), None)
    if start is None:
        return ""
    parts: list[str] = []
    for message in messages[start:]:
        parts.append(content_text(message))
        for call in message.get("tool_calls") or []:
            fn = call.get("function") or {}
            parts.append(f"{fn.get('name', '')} {fn.get('arguments', '')}")
    return "\n".join(p for p in parts if p)


def request_key(messages: Sequence[Message]) -> str:
    """What the user asked, as a key: unchanged while the agent loops through tool calls."""
    i = last_user_index(messages)
    return stable_hash(content_text(messages[i]) if i >= 0 else "")


def called_tool_names(messages: Sequence[Message]) -> set[str]:
    """Tools the assistant called in the forwarded context: each call must name a forwarded tool."""
    names: set[str] = set()
    for message in messages:
        if message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or []:
            name = (call.get("function") or call.get("custom") or {}).get("name")
            if isinstance(name, str):
                names.add(name)
        legacy = message.get("function_call")
        if isinstance(legacy, dict) and isinstance(legacy.get("name"), str):
            names.add(legacy["name"])
    return names


@dataclass(frozen=True)
class ToolChoice:
    names: frozenset[str]  # tools the request forces or allows by name
    required: bool  # the model must call some tool: never forward an empty list


def parse_tool_choice(choice: Any) -> ToolChoice:
    if choice == "required":
        return ToolChoice(frozenset(), True)
    if not isinstance(choice, dict):
        return ToolChoice(frozenset(), False)
    if choice.get("type") == "allowed_tools":
        allowed = choice.get("allowed_tools") or {}
        names = {_choice_name(t) for t in allowed.get("tools") or []}
        return ToolChoice(frozenset(n for n in names if n), allowed.get("mode") == "required")
    name = _choice_name(choice)
    return ToolChoice(frozenset([name]) if name else frozenset(), bool(name))


def _choice_name(entry: Any) -> str | None:
    if not isinstance(entry, dict):
        return None
    inner = entry.get("function") or entry.get("custom") or entry
    name = inner.get("name") if isinstance(inner, dict) else None
    return name if isinstance(name, str) else None


def top_relevant(relevance: np.ndarray, top_k: int, min_score: float) -> list[int]:
    """The top_k most relevant at or above min_score; ties go to the client's order."""
    order = np.argsort(-relevance, kind="stable")[:top_k]
    return [int(i) for i in order if relevance[i] >= min_score]


@dataclass(frozen=True)
class Remembered:
    request: str  # request_key of the user message the selection was made for
    toolset: str  # the tool set it was made from
    names: frozenset[str]
    relevance: dict[str, float]


class SelectionMemory:
    """Per session: the last selection, reused while the user's request and the tool set stay."""

    def __init__(self, max_sessions: int = 10_000) -> None:
        self._items: LRU[str, Remembered] = LRU(max_sessions)

    def recall(self, session: str, request: str, toolset: str) -> Remembered | None:
        hit = self._items.get(session)
        if hit is None or hit.request != request or hit.toolset != toolset:
            return None
        return hit

    def remember(self, session: str, item: Remembered) -> None:
        self._items.put(session, item)
