"""What the agent needs next, as a weighted query: read from its state, not only the user's words.

An agent's next tool follows from its own last step as much as from the request: the plan it
wrote, the calls it made, the result it just read. The query is up to four parts, each embedded
on its own and mixed by weight (tools.query in the config):

- request:   the latest user message (what is being asked now);
- task:      the first user message, when a later one is the request (what the run is for);
- assistant: the latest assistant turn after the request: its text and its calls with arguments;
- result:    the start of the tool results that answered it (a digest: keys, names, errors).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..cache import cache_short
from ..messages import Message, content_text, last_user_index
from .text import terms

# Each part is embedded; a contextual embedder (minilm) costs ~0.35 ms per token on one core, so
# every part is bounded (~250 tokens for the user's, ~75-120 for the agent's).
MAX_USER_CHARS = 1000
MAX_ASSISTANT_CHARS = 500
MAX_RESULT_CHARS = 300


@dataclass(frozen=True)
class QueryWeights:
    request: float = 1.0
    task: float = 0.3
    assistant: float = 0.5
    result: float = 0.3


@dataclass(frozen=True)
class QueryPart:
    kind: str  # request | task | assistant | result
    text: str
    weight: float


def agent_query(messages: Sequence[Message], weights: QueryWeights) -> list[QueryPart]:
    """The non-empty, positively weighted parts of the agent's current state."""
    i = last_user_index(messages)
    first = next((j for j, m in enumerate(messages) if m.get("role") == "user"), -1)
    parts = [QueryPart("request", content_text(messages[i])[:MAX_USER_CHARS] if i >= 0 else "", weights.request)]
    if 0 <= first < i:
        parts.append(QueryPart("task", content_text(messages[first])[:MAX_USER_CHARS], weights.task))
    assistant, result = latest_step(messages[i + 1 :])
    parts.append(QueryPart("assistant", assistant[:MAX_ASSISTANT_CHARS], weights.assistant))
    parts.append(QueryPart("result", result[:MAX_RESULT_CHARS], weights.result))
    return [p for p in parts if p.weight > 0 and p.text.strip()]


def latest_step(messages: Sequence[Message]) -> tuple[str, str]:
    """(the latest assistant turn's text and calls, the tool results after it)."""
    start = next((j for j in range(len(messages) - 1, -1, -1) if messages[j].get("role") == "assistant"), None)
    if start is None:
        return "", ""
    assistant = messages[start]
    said = [content_text(assistant)]
    for call in assistant.get("tool_calls") or []:
        fn = (call.get("function") or call.get("custom")) if isinstance(call, dict) else None
        if not isinstance(fn, dict):
            continue
        said.append(f"{fn.get('name', '')} {fn.get('arguments', '') or fn.get('input', '')}")
    results = [content_text(m) for m in messages[start + 1 :] if m.get("role") == "tool"]
    return "\n".join(s for s in said if s), "\n".join(r for r in results if r)


@cache_short(maxsize=4096, max_chars=MAX_USER_CHARS, sizeof=lambda args, value: 200 + 2 * len(args[0]) + 60 * len(value))
def part_terms(text: str) -> tuple[str, ...]:
    """A part's distinct terms, first seen first: the request's and the task's texts come back at
    every step of a run, so each is split and stemmed once."""
    return tuple(dict.fromkeys(terms(text)))


def weighted_terms(parts: Sequence[QueryPart]) -> dict[str, float]:
    """Each lexical term with the weight of the heaviest part it occurs in."""
    out: dict[str, float] = {}
    for part in parts:
        for term in part_terms(part.text):
            if part.weight > out.get(term, 0.0):
                out[term] = part.weight
    return out


def describe(parts: Sequence[QueryPart]) -> str:
    """The query as one text (the kinds it used), for the action detail."""
    return ",".join(p.kind for p in parts)
