"""The `tools` policy: context confusion from too many tools (a tool loadout per request).

More than `max_tools` tools confuse a model. Then the request is forwarded with the `top_k` tools
most relevant to its current intent (above `min_score`), plus the tools it must keep: the one
`tool_choice` names, the ones the assistant already called in the forwarded context, and
`always_keep`. Kept definitions are the client's own dicts, in the client's order. While the
user's request is unchanged (the agent loops through tool calls) the selection is reused, so the
tool prefix stays cache-stable; it only grows when a needed tool is missing from it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..base import BasePolicy, Exchange, PolicyConfig, Services, Verdict
from ..cache import LRU
from ..messages import Tool
from .catalog import CatalogReport, ToolCatalog
from .facts import FactsCache
from .ranking import ToolSetIndex, Weights
from .selection import (
    Remembered,
    SelectionMemory,
    called_tool_names,
    intent_text,
    parse_tool_choice,
    request_key,
    top_relevant,
)
from .text import terms, tool_name


class WeightsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    description: float = Field(1.0, ge=0)
    segments: float = Field(0.5, ge=0)
    lexical: float = Field(0.1, ge=0)

    @model_validator(mode="after")
    def _some_semantic_weight(self) -> "WeightsConfig":
        if self.description + self.segments <= 0:
            raise ValueError("description and segments cannot both be 0; to rank mostly lexically, make them small instead")
        return self


class ToolsConfig(PolicyConfig):
    max_tools: int = Field(30, ge=1)
    top_k: int = Field(5, ge=1)
    min_score: float = 0.0
    always_keep: list[str] = Field(default_factory=list)
    weights: WeightsConfig = WeightsConfig()


@dataclass
class Selection:
    """What the worker thread decided for one request."""

    kept: list[int]  # indices into the client's tools, in the client's order
    relevance: dict[str, float]  # the relevant tools' scores (kept for relevance, not forced)
    forced: list[str]  # kept because they must be
    reused: bool  # the session's previous selection, unchanged request
    tool_tokens: np.ndarray  # tokens per client tool
    catalog: CatalogReport = field(default_factory=CatalogReport)
    degraded: str | None = None  # why ranking fell back to lexical only
    skipped: str | None = None  # why nothing was filtered


class ToolsPolicy(BasePolicy):
    name = "tools"
    Config = ToolsConfig
    MAX_TOOL_SETS = 256  # ToolSetIndex objects kept (one per distinct tool set, tenant and embedder)

    def __init__(self, config: ToolsConfig, services: Services) -> None:
        super().__init__(config, services)
        self.weights = Weights(**config.weights.model_dump())
        self.catalog = ToolCatalog()
        self.facts = FactsCache()
        self.memory = SelectionMemory()
        self._indexes: LRU[tuple[str, ...], ToolSetIndex] = LRU(self.MAX_TOOL_SETS)

    async def on_request(self, ex: Exchange) -> Verdict | None:
        tools = ex.tools
        if not tools:
            return None
        metrics = self.services.metrics
        metrics.record("ctxwarden.tools.in", len(tools), model=ex.model)
        if len(tools) <= self.config.max_tools:
            metrics.record("ctxwarden.tools.out", len(tools), model=ex.model)
            return None
        selection = await asyncio.to_thread(
            self.select, tools, ex.messages, ex.body.get("tool_choice"), ex.model, ex.tenant, ex.session_id
        )
        self._report(ex, tools, selection)
        if len(selection.kept) < len(tools):
            ex.tools = [tools[i] for i in selection.kept]
        return None

    # ------------------------------------------------------------------ the decision (worker thread)

    def select(
        self,
        tools: list[Tool],
        messages: list[dict[str, Any]],
        tool_choice: Any,
        model: str,
        tenant: str | None,
        session_id: str,
    ) -> Selection:
        index, toolset, catalog, degraded = self._index(tools, tenant)
        tokens = self._tool_tokens(index, tools, model)
        choice = parse_tool_choice(tool_choice)
        must = set(choice.names) | called_tool_names(messages) | set(self.config.always_keep)
        # A tool without a name cannot be judged; dropping it would be a silent change.
        forced = {i for i, name in enumerate(index.names) if name is None or name in must}
        session, request = f"{tenant or ''}|{session_id}", request_key(messages)
        remembered = self.memory.recall(session, request, toolset)
        if remembered is not None:
            chosen = {i for i, name in enumerate(index.names) if name in remembered.names}
            relevance = remembered.relevance
        else:
            intent = intent_text(messages)
            if not intent.strip():
                return Selection(list(range(len(tools))), {}, [], False, tokens, catalog, degraded, skipped="no_intent")
            scores, degraded = self._relevance(index, intent, degraded)
            top = top_relevant(scores, self.config.top_k, self.config.min_score)
            if choice.required and not top and not forced:
                top = top_relevant(scores, 1, float("-inf"))  # "required" must leave a tool to call
            chosen = set(top)
            relevance = {str(index.names[i]): round(float(scores[i]), 4) for i in top}
        kept = sorted(chosen | forced)
        names = frozenset(str(index.names[i]) for i in kept)
        if remembered is None or names != remembered.names:
            self.memory.remember(session, Remembered(request, toolset, names, relevance))
        forced_names = sorted(str(index.names[i]) for i in forced - chosen)
        return Selection(kept, relevance, forced_names, remembered is not None, tokens, catalog, degraded)

    def _index(self, tools: list[Tool], tenant: str | None) -> tuple[ToolSetIndex, str, CatalogReport, str | None]:
        """The tool set's index: cached per (tool set, tenant, embedder); built through the catalog."""
        toolset = hashlib.sha256(json.dumps(tools, ensure_ascii=False, default=str).encode()).hexdigest()[:24]
        embedder = self.services.embedder
        space = embedder.name if embedder is not None else ""
        cache_key = (toolset, tenant or "", space)
        hit = self._indexes.get(cache_key)
        if hit is not None:
            return hit, toolset, CatalogReport(), None
        facts = self.facts.facts(tools)
        keys = [f.key for f in facts]
        report, degraded, vectors = CatalogReport(), None, None
        if embedder is None:
            degraded = "no embedder configured"
        else:
            try:
                vectors, report = self.catalog.vectors(keys, [f.text for f in facts], embedder, self.services.store, tenant)
            except Exception as exc:
                degraded = f"tool embeddings failed: {type(exc).__name__}: {exc}"
        index = ToolSetIndex.build([f.text.name for f in facts], [f.lexical for f in facts], vectors)
        index.facts = facts
        if degraded is None:  # a degraded index is rebuilt next time, when the embedder may be back
            self._indexes.put(cache_key, index)
        return index, toolset, report, degraded

    def _relevance(self, index: ToolSetIndex, intent: str, degraded: str | None) -> tuple[np.ndarray, str | None]:
        query = None
        if index.has_vectors:
            try:
                query = np.asarray(self.services.embedder.embed([intent])[0], dtype=np.float32)
            except Exception as exc:
                degraded = f"query embedding failed: {type(exc).__name__}: {exc}"
        return index.relevance(query, terms(intent), self.weights), degraded

    def _tool_tokens(self, index: ToolSetIndex, tools: list[Tool], model: str) -> np.ndarray:
        counts = index.token_counts.get(model)
        if counts is None:
            count = self.services.tokens.count_tools
            counts = np.array([f.token_count(model, lambda m, t=t: count([t], m)) for f, t in zip(index.facts, tools)])
            index.token_counts[model] = counts
        return counts

    # ------------------------------------------------------------------ reporting (event loop)

    def _report(self, ex: Exchange, tools: list[Tool], s: Selection) -> None:
        metrics = self.services.metrics
        before = int(s.tool_tokens.sum())
        after = int(s.tool_tokens[s.kept].sum()) if s.kept else 0
        self.record(ex, "confusion", tool_count=len(tools), threshold=self.config.max_tools, tool_tokens=before)
        metrics.add("ctxwarden.tools.confusion", 1, model=ex.model)
        if s.degraded:
            self.record(ex, "degraded", reason=s.degraded)
        if s.catalog.store_error:
            self.record(ex, "store_failed", error=s.catalog.store_error)
        if s.catalog.embedded:
            self.record(ex, "catalog_add", tools=s.catalog.embedded)
        if s.skipped:
            self.record(ex, "skipped", reason=s.skipped)
        kept_names = [str(tool_name(tools[i])) for i in s.kept]
        if len(s.kept) < len(tools):
            self.record(
                ex, "filter", tools_in=len(tools), tools_out=len(s.kept), kept=kept_names, forced=s.forced,
                reused=s.reused, relevance=json.dumps(s.relevance), tokens_before=before, tokens_after=after,
                tokens_saved=before - after,
            )
        metrics.record("ctxwarden.tools.out", len(s.kept), model=ex.model)
        metrics.record("ctxwarden.tools.tokens_saved", before - after, model=ex.model)
        if not s.reused:
            for score in s.relevance.values():
                metrics.record("ctxwarden.tools.relevance", score, model=ex.model)
