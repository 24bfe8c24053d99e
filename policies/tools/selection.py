"""Which tools a request must keep (tool_choice, earlier calls) and how many relevant ones it gets
(a fixed top_k, or adaptive: down to a relevance gap, between min_k and max_k)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..cache import stable_hash
from ..messages import Message, Tool, content_text, last_user_index
from ..text.tokens import tool_list_key
from .catalog import CatalogReport
from .loadout import ListChange
from .ranking import ToolSetIndex


def request_key(messages: Sequence[Message]) -> str:
    """What the user asked, as a key: unchanged while the agent loops through tool calls."""
    i = last_user_index(messages)
    return stable_hash(content_text(messages[i]) if i >= 0 else "")


def toolset_key(tools: list[Tool]) -> str:
    """A key equal for equal tool lists (`tool_list_key`: made once per request for its list, which the
    budget has usually keyed already on the event loop)."""
    return tool_list_key(tools)


def called_tool_names(messages: Sequence[Message]) -> set[str]:
    """Tools the assistant called in the forwarded context: each call must name a forwarded tool."""
    names: set[str] = set()
    for message in messages:
        if message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or []:
            inner = (call.get("function") or call.get("custom")) if isinstance(call, dict) else None
            name = inner.get("name") if isinstance(inner, dict) else None
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


def adaptive_relevant(relevance: np.ndarray, min_k: int, max_k: int, gap: float, min_score: float) -> list[int]:
    """The most relevant tools, as many as the scores say (between min_k and max_k).

    Past the first min_k, a tool is kept while it is within `gap` of the best score: a task whose
    top tools score alike (several steps, one server) keeps more, a task with one clear tool keeps
    few. Below min_score nothing is kept, whatever min_k says."""
    order = np.argsort(-relevance, kind="stable")[:max_k]
    if not len(order):
        return []
    best = relevance[order[0]]
    return [int(i) for rank, i in enumerate(order)
            if relevance[i] >= min_score and (rank < min_k or best - relevance[i] <= gap)]


@dataclass
class Selection:
    """What the worker thread decided for one request."""

    kept: list[int]  # indices into the client's tools, in forwarding order
    relevance: dict[str, float]  # this step's relevant tools and their scores (empty: not ranked)
    forced: list[str]  # kept because they must be, not for relevance
    k: int | None  # how many relevant tools this step's ranking chose (None: not ranked)
    query: str  # the parts of the agent's state the query used
    change: ListChange | None  # how the forwarded list differs from the session's previous one
    tool_tokens: np.ndarray  # tokens per client tool
    index: ToolSetIndex | None = None
    catalog: CatalogReport = field(default_factory=CatalogReport)
    degraded: str | None = None  # why ranking fell back to lexical only
    skipped: str | None = None  # why nothing was filtered


def by_name(names: list[str | None]) -> tuple[dict[str, list[int]], list[int]]:
    """Each name's indices in the tool set, and the nameless ones: computed once per set."""
    where: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        if name is not None:
            where.setdefault(name, []).append(i)
    return where, [i for i, name in enumerate(names) if name is None]


def client_order(index: ToolSetIndex, names: list[str]) -> list[str]:
    """Names in the client's order: a batch appended in one change reads as the client listed them."""
    return sorted(names, key=lambda n: index.positions.get(n, 0))
