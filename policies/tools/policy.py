"""The `tools` policy: context confusion from too many tools (a tool loadout per session).

More than `max_tools` tools confuse a model. Then the request is forwarded with the tools the
agent's current step needs, ranked from its state (query.py: the request, the task, its latest
call and result), as many as the scores say (`min_k`..`max_k`, or a fixed `top_k`), with the
siblings of chosen tools ranked up and, past the first few, only the servers in play (servers.py),
plus the tools it must keep: the one `tool_choice` names, the ones the conversation already
called, and `always_keep`.

The forwarded list is the session's loadout (loadout.py): append-only, so the cached prompt
prefix survives; kept definitions are the client's own dicts. With `search_tool` the model also
gets `find_tools` (search.py), answered here, for what the filter did not forward.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Hashable

import numpy as np

from ..base import BasePolicy, Exchange, Services, Verdict, embed_array
from ..cache import LRU
from ..deadline import NO_DEADLINE, UNTIL_EXIT, Deadline, OverBudget
from ..messages import Message, Tool, last_user_index
from ..text.prepared import PreparedOnce
from .catalog import CatalogReport, ToolCatalog
from .config import ToolsConfig
from .facts import FactsCache
from .loadout import CALLED, CLIENT, COMPACTION, FULL, GROW, REQUEST, ListChange, Loadout, Loadouts, extend
from .query import QueryPart, QueryWeights, agent_query, describe, weighted_terms
from .ranking import ToolSetIndex, Weights
from .report import report_selection, warn_uncached
from .restart import restart_list
from .finder import SearchTool
from .selection import (Selection, ToolChoice, adaptive_relevant, by_name, called_tool_names, client_order,
                        parse_tool_choice, request_key, toolset_key)
from .servers import NO_SERVER, focus, in_use, server_mask, sibling_boost
from .text import tool_name
from .twins import find_twins, with_twins
from .usage import UsageStats

__all__ = ["ToolsConfig", "ToolsPolicy", "Selection"]  # Selection: selection.py, re-exported

# The history policy records this action when a request is itself a compaction event: the cached
# prefix is gone then, so it is the one moment the tool list may shrink.
COMPACTION_ACTION = "history.compaction"
BUDGET_SPENT = "time budget spent"  # deadline.py's reason when the budget (not the client) ran out
WARMING = "catalog being embedded in the background"
log = logging.getLogger("ctxwarden.tools")


@dataclass
class Step:
    """One request, as the worker thread needs it."""

    tools: list[Tool]
    messages: list[Message]
    tool_choice: Any
    model: str
    tenant: str | None
    session: Hashable
    compacted: bool  # the history policy compacted this request
    # the messages as the client sent them: what the user asked is read from these, never from a note or a
    # summary another policy added to a user message (the forwarded `messages` still say what was called)
    client_messages: list[Message] | None = None

    @property
    def said(self) -> list[Message]:
        return self.messages if self.client_messages is None else self.client_messages


@dataclass
class Ranked:
    chosen: list[int]  # this step's relevant tools, best first (must-keep ones take no slot)
    scores: np.ndarray
    top: list[str]  # the first `grow_top` of `chosen` (a tool's twins right after it)
    parts: list[QueryPart]


class ToolsPolicy(SearchTool, BasePolicy):
    name = "tools"
    Config = ToolsConfig
    MAX_TOOL_SETS = 256  # ToolSetIndex objects kept (one per distinct tool set, tenant and embedder)
    # …and their bytes: an MCP catalog of 525 tools counts ~6.5 MB (2,428 vectors, the tools' facts,
    # postings). At the default budget (server.cache_mb 128) this share is ~16.5 MB: two such indexes (two
    # tenants on one catalog). At 4.7 MB the index did not fit and every step rebuilt it (~2 → ~200 ms).
    # A bigger tool set is still rebuilt at every request (memory stays within the budget): logged once.
    MAX_TOOL_SET_BYTES = 64 * 2**20
    MAX_QUERY_VECTORS = 4096  # query texts embedded (the task's text repeats on every step) …
    MAX_QUERY_VECTOR_BYTES = 4 * 2**20  # …and their bytes
    EMBED_CHUNK = 32  # tools asked of the catalog at once (the budget is checked between two asks)

    def __init__(self, config: ToolsConfig, services: Services) -> None:
        super().__init__(config, services)
        self.weights = Weights(**config.weights.model_dump())
        self.query_weights = QueryWeights(**config.query.model_dump())
        self.catalog = ToolCatalog()
        self.facts = FactsCache()
        self.loadouts = Loadouts(config.max_sessions, config.session_ttl_s)
        self.session_states = self.loadouts.states  # carried between replicas by a shared state backend
        self.usage = UsageStats()
        self._indexes: LRU[tuple[str, ...], ToolSetIndex] = LRU(self.MAX_TOOL_SETS, max_bytes=self.MAX_TOOL_SET_BYTES,
                                                                 sizeof=lambda _, index: index.nbytes)
        self._warned_uncached = False
        self.search_reader = PreparedOnce(self._prepare_search_reader, "tools-search-prepare")  # finder.py
        self._warming: dict[tuple[str, str], threading.Event] = {}  # (tool set, tenant) embedded in the background
        self._warming_lock = threading.Lock()
        self._query_vectors: LRU[tuple[str, str], np.ndarray] = LRU(
            self.MAX_QUERY_VECTORS, max_bytes=self.MAX_QUERY_VECTOR_BYTES, sizeof=lambda key, v: 200 + len(key[1]) + v.nbytes)

    async def on_request(self, ex: Exchange) -> Verdict | None:
        tools = ex.tools
        if not tools:
            return None
        metrics = self.services.metrics
        metrics.record("ctxwarden.tools.in", len(tools), model=ex.model)
        if len(tools) <= self.config.max_tools:
            metrics.record("ctxwarden.tools.out", len(tools), model=ex.model)
            return None
        step = Step(tools, ex.messages, ex.body.get("tool_choice"), ex.model, ex.tenant, ex.session_key,
                    compacted=any(a.label == COMPACTION_ACTION for a in ex.actions), client_messages=ex.original_messages)
        deadline = Deadline(self.config.budget_ms / 1000 if self.config.budget_ms else None, ex.notes.cancelled)
        try:
            selection = await asyncio.to_thread(self.select, step, deadline)
        except OverBudget as exc:  # invariant 7: every tool forwarded; the ones embedded are kept for the next request
            self.record(ex, "skipped_budget", reason=str(exc), budget_ms=self.config.budget_ms, tools=len(tools))
            metrics.add("ctxwarden.tools.skipped_budget", 1)
            if str(exc) == BUDGET_SPENT:
                self._embed_rest(tools, ex.tenant)
            return None
        report_selection(self, ex, tools, selection)
        if len(selection.kept) < len(tools):
            ex.tools = [tools[i] for i in selection.kept]
            if self.config.search_tool and self.config.max_inner_rounds > 0 and selection.index is not None:
                self._offer_search(ex, step, selection.index)
        return None

    def _embed_rest(self, tools: list[Tool], tenant: str | None) -> None:
        """A catalog the budget could not embed is finished in one background thread, between and
        during requests; this request stays as it was (invariant 7)."""
        key = (toolset_key(tools), tenant or "")
        with self._warming_lock:
            if key in self._warming:
                return
            done = self._warming[key] = threading.Event()

        def run() -> None:
            try:
                self._index(tools, tenant, UNTIL_EXIT, wait_for_warming=False)
            except OverBudget:  # the process is exiting; the chunks embedded so far are kept in the catalog
                pass
            except Exception:  # the next request tries again within its own budget
                log.exception("tools: embedding a catalog in the background failed")
            finally:
                with self._warming_lock:
                    del self._warming[key]
                done.set()

        # Not a daemon (a daemon killed while the embedder's native library runs aborts the process):
        # it stops at the next chunk once the process exits (UNTIL_EXIT).
        threading.Thread(target=run, name="ctxwarden-tools-catalog", daemon=False).start()

    # ------------------------------------------------------------------ the decision (worker thread)

    def select(self, step: Step, deadline: Deadline = NO_DEADLINE) -> Selection:
        index, catalog, degraded = self._index(step.tools, step.tenant, deadline)
        tokens = self._tool_tokens(index, step.tools, step.model)
        choice = parse_tool_choice(step.tool_choice)
        must = set(choice.names) | called_tool_names(step.messages) | set(self.config.always_keep)
        must_names = [n for n in index.names if n is not None and n in must]  # client order
        available = set(index.positions)
        request = request_key(step.said)
        loadout = self.loadouts.get(step.session)  # ranked outside the lock: other sessions need not wait
        reset = self._reset_reason(loadout, step, request)
        ranked = None
        if reset is not None or loadout.request != request or self.config.grow:
            listed = [index.positions[n] for n in (loadout.names if loadout and not reset else []) if n in index.positions]
            ranked, degraded = self._rank(index, step, [index.positions[n] for n in must_names], listed, degraded)
        if ranked is None and loadout is None:
            every = list(range(len(step.tools)))
            return Selection(every, {}, [], None, "", None, tokens, None, catalog, degraded, skipped="no_intent")
        with self.loadouts.lock:  # the list itself: read, extend, write as one step
            loadout = self.loadouts.get(step.session)
            reset = self._reset_reason(loadout, step, request)
            names, change = self._next_list(index, loadout, reset, must_names, ranked, choice, available)
            counted = self._learn(index, step, loadout.counted if loadout else set())
            self.loadouts.put(step.session, Loadout(names, request, counted))
        relevance = {str(index.names[i]): round(float(ranked.scores[i]), 4) for i in ranked.chosen} if ranked else {}
        chosen = set(ranked.chosen) if ranked else set()
        forced = [n for n in must_names if index.positions[n] not in chosen]
        return Selection(self._kept(index, names), relevance, forced, len(chosen) if ranked else None,
                         describe(ranked.parts) if ranked else "", change, tokens, index, catalog, degraded)

    def _reset_reason(self, loadout: Loadout | None, step: Step, request: str) -> str | None:
        if loadout is None:
            return "new"
        if step.compacted:
            return COMPACTION
        if not self.config.stable_list and loadout.request != request:
            return REQUEST
        return None

    def _next_list(self, index: ToolSetIndex, loadout: Loadout | None, reset: str | None,
                   must_names: list[str], ranked: Ranked | None, choice: ToolChoice,
                   available: set[str]) -> tuple[list[str], ListChange | None]:
        """The session's new list and how it differs from the previous one."""
        chosen = [str(index.names[i]) for i in (ranked.chosen if ranked else []) if index.names[i] is not None]
        if choice.required and not chosen and not must_names and ranked is not None:
            chosen = [str(index.names[int(np.argmax(ranked.scores))])]  # "required" must leave a tool to call
        previous = loadout.names if loadout else []
        fresh = must_names + client_order(index, chosen[: max(self.config.list_cap() - len(must_names), 1)])
        if reset is not None:
            names, _, _ = extend([], fresh, available)
        else:
            # Grow only when one of this step's first `grow_top` tools is missing (measured on dev: growing for any
            # missing top-k tool costs more changes than it saves find_tools calls); each change costs the cache.
            # A must-keep tool (called, or named by tool_choice) changes the list anyway: this step's
            # ranked batch joins in the same change instead of costing one of its own later.
            changing = any(n not in previous for n in must_names)
            grow = any(n not in previous and n not in must_names for n in (ranked.top if ranked else ()))
            picks = chosen if changing or grow else []
            names, _, _ = extend(previous, must_names + client_order(index, picks), available)
            if len(names) > self.config.list_cap():  # start again (restart.py)
                reset = FULL
                kept = restart_list(index, ranked.scores if ranked else None, must_names, chosen, previous,
                                    self.config.restart_cap())
                names, _, _ = extend([], must_names + client_order(index, kept[len(must_names):]), available)
        if loadout is None or names == previous:
            return names, None
        added = tuple(n for n in names if n not in set(previous))
        removed = tuple(n for n in previous if n not in set(names))
        reason = reset or (CLIENT if not added else CALLED if any(n in must_names for n in added) else GROW)
        return names, ListChange(added, removed, reason)

    def _rank(self, index: ToolSetIndex, step: Step, must: list[int], listed: list[int],
              degraded: str | None) -> tuple[Ranked | None, str | None]:
        """This step's relevant tools. The must-keep ones are kept anyway and their calls fill the
        query with their own names, so they anchor their servers but take no relevance slot."""
        parts = agent_query(step.said, self.query_weights)
        if not parts:
            return None, degraded
        scores, degraded = self._scores(index, parts, degraded)
        turn = step.messages[last_user_index(step.messages) + 1:]  # in use for this request: a new one may leave it
        called = [index.positions[n] for n in called_tool_names(turn) if n in index.positions]
        scores = self._structure(index, scores, must + listed, step.tenant, called)
        candidates = scores.copy()
        candidates[must] = -np.inf
        lo, hi = self.config.k_range()
        chosen = adaptive_relevant(candidates, lo, hi, self.config.gap, self.config.min_score)
        chosen = focus(chosen, index.groups, must + listed, self.config.server_focus)
        if self.config.twins:  # the agent may know the other server's twin (twins.py)
            chosen = with_twins(chosen, self.twins(index))
        top = [str(index.names[i]) for i in chosen[: self.config.grow_top] if index.names[i] is not None]
        return Ranked(chosen, scores, top, parts), degraded

    def _structure(self, index: ToolSetIndex, scores: np.ndarray, anchors: list[int], tenant: str | None,
                   called: list[int] = ()) -> np.ndarray:
        """Scores with the catalog's structure: the anchored servers' close siblings, the tools of the
        servers this session called (in use), and the tools agents use with those servers (usage.py), ranked up."""
        if not len(scores):
            return scores
        anchors = [*anchors, int(np.argmax(scores))]  # the best tool's server is the step's server
        boosted = sibling_boost(scores, index.groups, anchors, self.config.sibling_boost)
        if self.config.server_boost > 0 and len(called):
            boosted = boosted + self.config.server_boost * in_use(index.groups, called)
        if self.config.usage_boost > 0:
            shares = self._derived(index, "shares", lambda: self.usage.shares(tenant, index.names, index.groups, index.servers))
            anchored = [int(index.groups[i]) for i in anchors if index.groups[i] != NO_SERVER]
            boosted = boosted + self.config.usage_boost * shares * server_mask(index.groups, anchored)
        if self.config.popularity_boost > 0:
            boosted = boosted + self.config.popularity_boost * self._popularity(index, tenant)
        return boosted

    def twins(self, index: ToolSetIndex) -> list[tuple[int, ...]]:
        """The tool set's twins (twins.py), found once per set."""
        hit = index.derived.get("twins")
        if hit is None:
            hit = index.derived["twins"] = find_twins(index.names, index.groups, index.documents)
        return hit

    def _popularity(self, index: ToolSetIndex, tenant: str | None) -> np.ndarray:
        return self._derived(index, "popularity", lambda: self.usage.popularity(tenant, index.names))

    def _derived(self, index: ToolSetIndex, key: str, compute: Any) -> np.ndarray:
        """A usage-derived array of this tool set (an index is per tenant), recomputed only after new
        calls were counted: the shares and popularity loop over the catalog's names in Python."""
        version = self.usage.version
        hit = index.derived.get(key)
        if hit is not None and hit[0] == version:
            return hit[1]
        value = compute()
        index.derived[key] = (version, value)
        return value

    def _learn(self, index: ToolSetIndex, step: Step, counted: set[str]) -> set[str]:
        """Count the session's newly called tools and servers (usage.py); what is counted now."""
        called = {n for n in called_tool_names(step.messages) if n in index.positions}
        new_tools = called - counted
        if not new_tools:
            return counted
        servers = {f"server:{index.servers[g]}" for n in called if (g := int(index.groups[index.positions[n]])) != NO_SERVER}
        new_servers = servers - counted
        self.usage.count(step.tenant, new_tools, [s.removeprefix("server:") for s in new_servers], new_session=not counted)
        return counted | new_tools | new_servers

    def _scores(self, index: ToolSetIndex, parts: list[QueryPart], degraded: str | None) -> tuple[np.ndarray, str | None]:
        vector = None
        if index.has_vectors:
            try:
                vector = self._query_vector(parts)
            except Exception as exc:
                degraded = f"query embedding failed: {type(exc).__name__}: {exc}"
        return index.relevance(vector, weighted_terms(parts), self.weights), degraded

    def _query_vector(self, parts: list[QueryPart]) -> np.ndarray:
        """The weighted mean of the parts' vectors (each text embedded once, then cached)."""
        embedder = self.services.embedder
        vectors = {p.text: self._query_vectors.get((embedder.name, p.text)) for p in parts}
        missing = [t for t, v in vectors.items() if v is None]
        if missing:
            for text, vec in zip(missing, embed_array(embedder, missing)):
                vectors[text] = vec.copy()  # its own row, not a view that keeps the batch alive
                self._query_vectors.put((embedder.name, text), vectors[text])
        total = sum(p.weight for p in parts)
        return sum(p.weight * vectors[p.text] for p in parts) / total

    def _kept(self, index: ToolSetIndex, names: list[str]) -> list[int]:
        """Indices to forward: nameless tools first (never judged, never dropped), then the list."""
        where, nameless = index.derived.get("by_name") or index.derived.setdefault("by_name", by_name(index.names))
        return nameless + [i for name in names for i in where.get(name, [])]

    def _index(self, tools: list[Tool], tenant: str | None,
               deadline: Deadline = NO_DEADLINE, wait_for_warming: bool = True) -> tuple[ToolSetIndex, CatalogReport, str | None]:
        """The tool set's index: cached per (tool set, tenant, embedder); built through the catalog. A
        request with a budget waits for a background thread embedding the same set (that thread does not)."""
        toolset = toolset_key(tools)
        waits = wait_for_warming and deadline is not NO_DEADLINE
        warming = self._warming.get((toolset, tenant or "")) if waits else None
        left = None if deadline.at is None else max(0.0, deadline.at - time.monotonic())
        if warming is not None and not warming.wait(left):  # this request's budget waits for the background
            raise OverBudget(WARMING)
        embedder = self.services.embedder
        space = embedder.name if embedder is not None else ""
        cache_key = (toolset, tenant or "", space)
        hit = self._indexes.get(cache_key)
        if hit is not None:
            return hit, CatalogReport(), None
        facts = self.facts.facts(tools)
        keys = [f.key for f in facts]
        report, degraded, vectors = CatalogReport(), None, None
        if embedder is None:
            degraded = "no embedder configured"
        else:
            try:
                vectors, report = self._vectors(keys, facts, tenant, deadline)
            except OverBudget:
                raise
            except Exception as exc:
                degraded = f"tool embeddings failed: {type(exc).__name__}: {exc}"
        index = ToolSetIndex.build([f.text.name for f in facts], [f.lexical for f in facts], vectors)
        index.facts = facts
        if degraded is None:  # a degraded index is rebuilt next time, when the embedder may be back
            self._indexes.put(cache_key, index)
            if not self._warned_uncached and self._indexes.get(cache_key) is None:  # refused: bigger than its share
                self._warned_uncached = True
                warn_uncached(index, self._indexes.max_bytes or 0)
        return index, report, degraded

    def _vectors(self, keys: list[str], facts: list, tenant: str | None, deadline: Deadline) -> tuple[list, CatalogReport]:
        """The catalog's vectors, EMBED_CHUNK tools at a time: hundreds of tools never seen stop at the
        budget between two chunks (the catalog keeps what was embedded)."""
        vectors: list = []
        report = CatalogReport()
        for start in range(0, len(keys), self.EMBED_CHUNK):
            deadline.check()
            part, got = self.catalog.vectors(keys[start:start + self.EMBED_CHUNK], [f.text for f in facts[start:start + self.EMBED_CHUNK]],
                                             self.services.embedder, self.services.store, tenant)
            vectors += part
            report.embedded, report.loaded = report.embedded + got.embedded, report.loaded + got.loaded
            report.store_error = report.store_error or got.store_error
        return vectors, report

    def _tool_tokens(self, index: ToolSetIndex, tools: list[Tool], model: str) -> np.ndarray:
        counts = index.token_counts.get(model)
        if counts is None:
            count = self.services.tokens.count_tools
            counts = np.array([f.token_count(model, lambda m, t=t: count([t], m)) for f, t in zip(index.facts, tools)])
            index.token_counts[model] = counts
        return counts

