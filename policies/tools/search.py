"""The `find_tools` tool: the agent's way to ask for a tool the filter did not forward.

When the policy hides tools it offers `find_tools(query)`. The proxy answers a call itself (the
model's call never reaches the client): it searches every tool the client sent, answers with
names and one-line descriptions, and appends the found tools to the forwarded list, so they are
callable in the proxy's next round and from the next step on (the session's loadout keeps them).
"""

from __future__ import annotations

import json
from typing import Any, Sequence

FIND_TOOLS = "find_tools"
MAX_QUERY_CHARS = 300
SUMMARY_CHARS = 140

FIND_TOOLS_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": FIND_TOOLS,
        "description": (
            "Search all tools available to you, including ones not listed here. Describe the action you "
            "need; the best matches are returned and become callable right away."
        ),
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string", "description": "The action you need a tool for, in a few words."}},
            "required": ["query"],
            "additionalProperties": False,
        },
    },
}


def parse_query(raw_arguments: str) -> str | None:
    """The query of a call's JSON arguments; None when there is none to search with."""
    try:
        args = json.loads(raw_arguments or "{}")
    except ValueError:
        return None
    query = args.get("query") if isinstance(args, dict) else None
    if not isinstance(query, str) or not query.strip():
        return None
    return query.strip()[:MAX_QUERY_CHARS]


def summary(description: str) -> str:
    """One line of a description: its start, cut at a word, whitespace folded."""
    line = " ".join(description.split())
    if len(line) <= SUMMARY_CHARS:
        return line
    return line[:SUMMARY_CHARS].rsplit(" ", 1)[0] + "…"


def answer(query: str, found: Sequence[tuple[str, str]], added: Sequence[str]) -> str:
    """The tool result the model reads: each match on one line, new ones marked as just added."""
    if not found:
        return f"No tool matches '{query}'. Try other words for the action, or go on without one."
    new = set(added)
    lines = [f"Tools matching '{query}' (callable now):"]
    lines += [f"- {name}: {text}" + (" [added]" if name in new else "") for name, text in found]
    return "\n".join(lines)


def invalid() -> str:
    return f'error: {FIND_TOOLS} needs {{"query": "<the action you need a tool for>"}}.'


def description_of(tool: dict[str, Any]) -> str:
    inner = tool.get("function") or tool.get("custom") or tool
    text = inner.get("description") if isinstance(inner, dict) else None
    return summary(text) if isinstance(text, str) else ""
